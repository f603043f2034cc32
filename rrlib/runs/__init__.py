"""The run machinery: configs and presets, data, one training run, its checkpoints and run files, a sweep,
evaluation, and run folders read back (loading). May import rrlib.model and rrlib.rules, never the studies, the
report or the speed tools.
"""
