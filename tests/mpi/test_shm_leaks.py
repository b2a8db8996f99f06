"""The end-of-run cleanup of /dev/shm (tests/mpi/shm_leaks.py) removes only what a run leaked.

Checked in a scratch directory standing in for /dev/shm: a new, unused, old-enough MPI segment goes;
one that was there before, one a live process keeps open, one just created, and a file of another
name stay.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import shm_leaks

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux's /proc")


def _file(path: Path, age: float) -> Path:
    path.write_bytes(b"\0" * 64)
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_only_new_unused_old_enough_mpi_segments_are_removed(tmp_path: Path) -> None:
    old = _file(tmp_path / "sm_segment.host.0.1.0", 60)
    before = shm_leaks.snapshot(tmp_path)
    leaked = _file(tmp_path / "sm_segment.host.0.2.0", 60)
    leaked2 = _file(tmp_path / "mpich_shm_abc", 60)
    fresh = _file(tmp_path / "Intel_MPI_xyz", 0)
    other = _file(tmp_path / "someone_elses_file", 60)
    held = _file(tmp_path / "mpich_shm_held", 60)
    with open(held, "rb"):  # a live process (this one) has it open
        removed = shm_leaks.remove_leaked(before, tmp_path)
    assert sorted(removed) == sorted([leaked.name, leaked2.name])
    assert not leaked.exists() and not leaked2.exists()
    for kept in (old, fresh, other, held):
        assert kept.exists(), kept.name


def test_a_mapped_segment_counts_as_in_use(tmp_path: Path) -> None:
    import mmap

    path = _file(tmp_path / "vader_segment.mapped", 60)
    with open(path, "r+b") as fh:
        view = mmap.mmap(fh.fileno(), 64)
    try:  # the file is closed, only the mapping holds it
        assert path.name in shm_leaks.in_use(tmp_path)
        assert shm_leaks.leaked(frozenset(), tmp_path) == []
    finally:
        view.close()
    assert shm_leaks.leaked(frozenset(), tmp_path) == [path]
