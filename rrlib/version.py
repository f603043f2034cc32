"""The library's version, recorded in every result file; its own module, so that what records it need not import
the package's public names (rrlib/__init__.py), which import what records it."""
__version__ = "0.1.0"
