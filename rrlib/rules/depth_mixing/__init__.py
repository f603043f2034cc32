"""The operators the cross-depth rules are built from: depth attention, reads and writes of stacked streams, norms
and Sinkhorn, and HC's, mHC's and MGR's steps as single autograd nodes, each in the form that measured fastest on
a CPU at the ``family`` size while computing the same numbers (tests/test_cross_depth_reference.py holds the first
formulas they replaced). Imports rrlib.rules.protocol's constants and rrlib.rules.native, nothing else of rrlib's.
"""
