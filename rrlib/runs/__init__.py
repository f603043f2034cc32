"""The run machinery, by concern: settings (config, presets, validate, arguments); the data (``runs.data``: the
stories, tokenizers, batches and windows, with where the data comes from, its token cache and a run's data check);
training (device, pace, optim, evaluate, train, sweep, provenance); a run folder (``runs.folders``: its lock and
claim, with its files, checkpoints, the atomic writer and where a command may write); and run folders read back
(loading). May import rrlib.model and rrlib.rules, never the studies, the report or the speed tools.
"""
