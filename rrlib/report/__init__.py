"""The report: executing and rendering the notebooks, and what they draw on (figures, reader tables, run
folders read back, gate probes, statistics). May import rrlib.runs, rrlib.model and rrlib.rules.
"""
