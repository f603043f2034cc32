"""What the pages and ``rrlib compare`` draw with: figures (``plots``: one style, PNG export, the forest plot),
reader tables (``tables``: formats, stored digits, the CSV beside each), the powered designs' tables
(``power_tables``) and page 08's board (``leaderboard``). It shows results; it computes none. May import the
results, studies, runs and stats beneath it; the claims, compare and the report's build import it, never the other
way.
"""
