"""The run machinery: configs and presets, data, one training run, its checkpoints and run files, a sweep,
evaluation. May import rrlib.model and rrlib.rules, never the report or the speed tools.
"""
