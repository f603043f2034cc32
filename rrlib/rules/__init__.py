"""The residual rules: the stream protocol and its registry, every rule, the depth-mixing operators the
cross-depth rules are built from, and the CPU kernels those call. Imports nothing of rrlib's outside itself.
"""
