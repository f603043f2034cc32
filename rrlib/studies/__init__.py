"""The report's own studies, apart from its build machinery. A study module holds one study, written down before its
runs: what it trains (arms, sizes, seeds), how its seeds are sized, and how its runs are read back into the numbers
a page and the claims ledger judge. ``registry`` lists every study as one entry of data, and ``rrlib study``
(``command``; ``work``, a plan's calls and where each run stands) lists, plans, runs and follows them;
``user_board`` joins a user's rule to a study that compares rules.

The studies: ``claims_study`` (notebook 07's runs and probes), ``depth_reach_study`` and ``looped_reach_study``
(the claims the CPU can reach), ``looped_study`` (looped learning-rate transfer), ``power_study`` (the powered
designs of pages 04 and 05) and ``leaderboard_study`` (page 08). What they share: ``study_plan`` (a registered
study as data, and its runs) and ``sizing`` (seeds from a pilot's spread). What they measure a trained model with:
``probes`` (what each sublayer reads, depth routing) and ``gates`` (what Review's gate does, and the sublayers'
names probes uses); they sit here because the studies measure with them (claims_study writes the probes' readings
into its run folders), and pages 01, 02 and 07 use them too.

A study gives numbers; how a page shows them (reader tables, figures) is the report's: rrlib.views.power_tables,
rrlib.results.leaderboard. May import rrlib.runs (reading a run folder back is runs.loading's), rrlib.model,
rrlib.rules and rrlib.stats; the report and the claims ledger, which show the studies, import them, never the other
way round.
"""
