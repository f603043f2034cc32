"""Residual rules whose state carries more than one stream or source (AttnRes, MGR, Hyper-Connections, ...)."""
