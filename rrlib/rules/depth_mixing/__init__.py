"""The operators the cross-depth rules are built from: depth attention, reads and writes of stacked streams,
norms and Sinkhorn, and HC's, mHC's and MGR's steps as single autograd nodes. Imports rrlib.rules.native only.
"""
