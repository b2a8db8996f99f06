"""Helpers for testing backends: :mod:`mmeval.testing.conformance` is the shared suite."""
