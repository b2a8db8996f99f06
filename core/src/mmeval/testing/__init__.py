"""Helpers for testing backends and metrics.

:mod:`mmeval.testing.conformance` is the suite every backend must pass;
:mod:`mmeval.testing.ranks` runs a function on N ranks as real processes
(free ports, per-rank outcomes, a bound) for multi-rank tests;
:mod:`mmeval.testing.rank0_memory` measures rank 0's peak memory in a
per-sample ``compute()`` inside a launched rank.
"""
