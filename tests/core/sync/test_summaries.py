"""Samples summarized on the rank that holds them (BaseMetric._keep_to_summarize) and packed summaries (core.packed)."""

from __future__ import annotations

import pickle
from typing import Any, Dict, List

import numpy as np
import pytest
from hub_backend import run_ranks

from mmeval.core import BaseMetric
from mmeval.core.packed import (
    PackedColumns,
    pack_arrays,
    summary_digests,
    trits_to_words,
    unpack_arrays,
    words_to_trits,
)


class Lengths(BaseMetric):
    """Each sample (a list) summarized to its length, in bulk; counts how often _summarize ran."""

    calls = 0

    def add(self, items: List[List[int]]) -> None:  # type: ignore[override]
        if any(not isinstance(i, list) for i in items):
            raise ValueError("items must be lists")
        self._keep_to_summarize(list(items))

    def _summarize(self, samples: List[Any]) -> List[Any]:
        type(self).calls += 1
        if any(s == ["boom"] for s in samples):
            raise RuntimeError("cannot summarize 'boom'")
        return [len(s) for s in samples]

    def compute_metric(self, results: List[int]) -> Dict[str, Any]:
        return {"lengths": list(results)}


def test_summarized_once_in_bulk_before_compute_and_in_order():
    Lengths.calls = 0
    m = Lengths()
    m.add([[1], [1, 2]])
    m.add([[], [1, 2, 3]])
    assert m.num_results == 4 and m._num_pending == 4 and Lengths.calls == 0
    assert m.compute() == {"lengths": [1, 2, 0, 3]} and Lengths.calls == 1
    assert m.compute() == {"lengths": [1, 2, 0, 3]} and Lengths.calls == 1  # kept as summaries
    assert m([[5, 5]]) == {"lengths": [2]} and m.num_results == 4  # a stateless call summarizes its own
    restored = pickle.loads(pickle.dumps(m))
    assert restored.compute() == {"lengths": [1, 2, 0, 3]}


def test_indices_and_size_see_summaries_like_results():
    m = Lengths()
    m.add([[1, 1], [1]], indices=[5, 2])
    m.add([[1, 1, 1], [1]], indices=[0, 2])  # index 2 again: its first occurrence counts
    assert m.compute() == {"lengths": [3, 1, 2]}
    m = Lengths()
    m.add([[1], [1, 1], [1, 1, 1]])
    assert m.compute(size=3) == {"lengths": [1, 2, 3]}
    with pytest.raises(ValueError, match="3 samples were added"):  # more than size explains (issue 32, item 9)
        m.compute(size=2)


def test_a_refused_add_keeps_nothing_pending():
    m = Lengths()
    m.add([[1]])
    with pytest.raises(ValueError):
        m.add([[1], [2]], indices=[0])  # two samples, one index: refused, nothing of it kept
    assert m._num_pending == 1 and m.num_results == 1
    m.reset()
    assert m._num_pending == 0


def _failing_worker(backend, _):
    m = Lengths(dist_backend=backend)
    m.add([["boom"]] if backend.rank == 1 else [[1]])
    try:
        m.compute()
    except Exception as exc:  # the type and message are what the test checks
        return type(exc).__name__, str(exc)
    return "no error", ""


def test_a_failed_summary_on_one_rank_raises_on_every_rank():
    out = run_ranks(_failing_worker, 2, None, timeout=60)
    (s0, (t0, m0)), (s1, (t1, m1)) = out[0], out[1]
    assert s0 == s1 == "ok"
    assert t1 == "ValueError" and "cannot summarize 'boom'" in m1
    assert t0 in ("CollectiveMismatchError", "ValueError") and "rank 1" in m0


@pytest.mark.parametrize("long_at", [None, 0, 2])
def test_packed_columns_equal_concatenation_whatever_the_headers(long_at):
    """Headers read all at once when every length is short, one blob at a time otherwise (a long array
    first or later in one blob): the columns are the concatenations either way, writable, dtypes
    promoted as np.concatenate promotes them."""
    rng = np.random.default_rng(7)
    samples = []
    for i in range(300):
        n = int(rng.integers(0, 12))
        score_type = np.float32 if i % 7 else np.float64  # one column of two dtypes
        samples.append(
            [
                rng.random(n).astype(score_type),
                rng.integers(0, 300, n).astype(np.uint16),
                rng.random(n) < 0.5,
                np.arange(int(rng.integers(0, 3)), dtype=np.int64),
            ]
        )
    samples[12][1] = np.arange(1000, dtype=np.uint16)  # a short length with a high byte
    if long_at is not None:
        samples[137][long_at] = np.arange(70_000).astype(samples[137][long_at].dtype)
    blobs = [pack_arrays(*x) for x in samples]
    packed = PackedColumns(blobs, 4)
    assert packed.lengths.tolist() == [[a.size for a in x] for x in samples]
    for j in range(4):
        want = np.concatenate([x[j] for x in samples])
        got = packed.column(j)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        got[:1] = got[:1]  # writable
    empty = PackedColumns([], 4)
    assert empty.lengths.shape == (0, 4) and empty.column(2).size == 0
    bad = list(blobs)
    bad[250] = bytes([3]) + bad[250][1:]
    with pytest.raises(ValueError, match="summary 250 holds 3 arrays, expected 4"):
        PackedColumns(bad, 4)


def test_summary_digests_follow_the_bytes_alone():
    """A summary's digest is BLAKE2b-64 of its bytes (little-endian): the same for equal summaries wherever
    and whenever they were packed, different for different ones -- what equal scores rank by (issue 32 item 5)."""
    import hashlib

    a = pack_arrays(np.array([0.5, 0.25], dtype=np.float32), np.array([1, 2], dtype=np.uint16))
    b = pack_arrays(np.array([0.5, 0.25], dtype=np.float32), np.array([2, 1], dtype=np.uint16))
    got = summary_digests([a, b, bytes(a)])
    assert got.dtype == np.uint64 and got.shape == (3,)
    assert got[0] == got[2] != got[1]
    assert int(got[0]) == int.from_bytes(hashlib.blake2b(a, digest_size=8).digest(), "little")
    assert summary_digests([]).shape == (0,)


def test_packed_round_trip():
    rng = np.random.default_rng(0)
    samples = [
        [rng.random(n).astype(np.float32), rng.integers(0, 9, n).astype(np.uint8), np.arange(m, dtype=np.int64)]
        for n, m in ((3, 0), (0, 2), (70_000, 1))
    ]
    blobs = [pack_arrays(*s) for s in samples]
    lengths, cols = unpack_arrays(blobs, 3)
    assert lengths.tolist() == [[3, 3, 0], [0, 0, 2], [70_000, 70_000, 1]]
    for j in range(3):
        assert np.array_equal(cols[j], np.concatenate([s[j] for s in samples]))
        assert cols[j].dtype == samples[0][j].dtype
    with pytest.raises(ValueError, match="holds 3 arrays"):
        unpack_arrays(blobs, 2)
    with pytest.raises(TypeError, match="not packable"):
        pack_arrays(np.array(["a"]))
    trits = rng.integers(0, 3, (50, 83)).astype(np.uint8)
    words = trits_to_words(trits)
    assert words.dtype == np.uint64 and words.size == 50 * 3
    assert np.array_equal(words_to_trits(words, 50, 83), trits)


def test_pack_many_is_pack_arrays_row_by_row():
    """pack_many of columns and per-row lengths: every row's bytes those of pack_arrays of its slices, for
    every packable dtype (a big-endian one among them), empty rows, no rows, and lengths past a uint16."""
    from mmeval.core.packed import pack_arrays, pack_many

    rng = np.random.default_rng(0)
    for trial in range(60):
        n, count = int(rng.integers(0, 30)), int(rng.integers(1, 7))
        dts = [
            str(rng.choice(["?", "u1", "u2", "u4", "u8", "i1", "i4", "i8", "f4", "f8", ">f8"])) for _ in range(count)
        ]
        lengths = rng.integers(0, 70_000 if trial % 20 == 0 else 9, (n, count))
        cols = [(rng.random(int(lengths[:, j].sum())) * 100).astype(np.dtype(dts[j])) for j in range(count)]
        at = np.vstack([np.zeros((1, count), np.int64), np.cumsum(lengths, axis=0)])
        want = [pack_arrays(*(cols[j][at[i, j] : at[i + 1, j]] for j in range(count))) for i in range(n)]
        assert pack_many(cols, lengths) == want, (trial, dts)
