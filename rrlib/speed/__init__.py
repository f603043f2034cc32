"""The speed tools: the benchmark (step time, tokens/s, MFU, ratios), tensor memory, and what a sweep costs.
May import rrlib.runs, rrlib.model and rrlib.rules.
"""
