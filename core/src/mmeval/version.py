"""The version of the core distribution (a plugin pins the ``mmeval-core`` range it supports)."""

__version__ = "0.1.0"
