"""The report: executing and rendering the notebooks, and what they draw on (figures, reader tables, the
studies' results as a page shows them). May import rrlib.studies, rrlib.runs, rrlib.stats, rrlib.model and
rrlib.rules.
"""
