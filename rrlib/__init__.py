"""rrlib: Review Residuals (Kramer, 2026) and its family of residual rules in one small PyTorch harness."""

__version__ = "0.1.0"
