"""The buffer pool: aligned buffers, reused only once nothing refers to them (no MPI involved)."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

pytest.importorskip("mmeval_mpi4py")
from mmeval_mpi4py.buffers import POOL_MIN_BYTES, BufferPool, aligned_empty

MiB = 2**20
CAP = 64 * MiB

pytestmark = pytest.mark.skipif(not hasattr(sys, "getrefcount"), reason="the pool needs reference counts")


def addr(a: np.ndarray) -> int:
    return int(a.ctypes.data)


@pytest.mark.parametrize("n", [0, 1, 63, 4096, POOL_MIN_BYTES + 5])
def test_aligned(n: int) -> None:
    a = aligned_empty(n)
    assert a.nbytes == max(n, 1) and addr(a) % 64 == 0 and a.dtype == np.uint8
    b = BufferPool().get(n, CAP)
    assert b.nbytes == max(n, 1) and addr(b) % 64 == 0


def test_small_buffers_are_not_pooled() -> None:
    pool = BufferPool()
    pool.get(POOL_MIN_BYTES - 1, CAP)
    assert pool.nbytes == 0


def test_reused_only_when_free() -> None:
    pool = BufferPool()
    first = pool.get(3 * MiB, CAP)
    where = addr(first)
    second = pool.get(3 * MiB, CAP)
    assert addr(second) != where, "a buffer in use is never handed out twice"
    del first
    third = pool.get(3 * MiB - 100, CAP)
    assert addr(third) == where, "a free buffer is reused"
    assert pool.nbytes == 2 * 3 * MiB


@pytest.mark.parametrize("holder", ["memoryview slice", "numpy view", "unpickled array", "bytes-like export"])
def test_any_view_keeps_a_buffer_in_use(holder: str) -> None:
    pool = BufferPool()
    buf = pool.get(2 * MiB, CAP)
    buf[:] = 7
    where = addr(buf)
    mv = memoryview(buf)
    if holder == "memoryview slice":
        keep = mv[64:128]
    elif holder == "numpy view":
        keep = np.frombuffer(mv[64:1064], dtype=np.float64)
    elif holder == "unpickled array":
        arr = np.arange(1000, dtype=np.int64)
        raw: list = []
        meta = pickle.dumps(arr, protocol=5, buffer_callback=lambda pb: raw.append(pb.raw()) or False)
        mv[: arr.nbytes] = raw[0]
        keep = pickle.loads(meta, buffers=[mv[: arr.nbytes]])
        assert not keep.flags.owndata and np.array_equal(keep, np.arange(1000))
    else:
        keep = memoryview(mv[:10].obj)  # a second export of the same array
    del buf, mv
    again = pool.get(2 * MiB, CAP)
    assert addr(again) != where, f"reused while a {holder} was alive"
    del keep, again
    assert addr(pool.get(2 * MiB, CAP)) == where


def test_cache_limit() -> None:
    pool = BufferPool()
    assert pool.get(CAP + 1, CAP).nbytes == CAP + 1
    assert pool.nbytes == 0, "larger than the cache: never kept"
    held = [pool.get(20 * MiB, CAP) for _ in range(5)]
    assert pool.nbytes <= CAP, "in-use buffers beyond the limit are forgotten, not kept"
    assert all(h.nbytes == 20 * MiB for h in held)
    del held
    assert pool.get(2 * MiB, 0).nbytes == 2 * MiB  # cache 0: fresh every time


def test_oversized_free_buffers_are_not_used_for_small_requests() -> None:
    pool = BufferPool()
    big = pool.get(40 * MiB, CAP)
    where = addr(big)
    del big
    small = pool.get(2 * MiB, CAP)
    assert addr(small) != where
