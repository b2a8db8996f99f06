"""The shared collective path (FramedDistBackend) with real processes over TCP."""

from __future__ import annotations

from typing import Any

import framed_workers as w
import numpy as np
import pytest
from hub_backend import run_ranks


def _ok(results):
    bad = {r: v for r, (s, v) in results.items() if s != "ok"}
    assert not bad, bad
    return {r: v for r, (s, v) in results.items()}


@pytest.mark.parametrize("ws", [1, 2, 3, 4])
def test_collectives(ws):
    out = _ok(run_ranks(w.collectives, ws, False))
    for r in range(ws):
        o = out[r]
        assert o["rank"] == r and o["ws"] == ws
        assert [g[0] for g in o["all_gather"]] == list(range(ws))
        assert o["all_gather"][1 % ws][1] == float((np.arange(10, dtype=np.float32) + 1 % ws).sum())
        assert o["all_gather"][0][2] == [0, ("x", {"y": 0})]
        if r == ws - 1:
            assert o["gather"] == [(i, 9.0 + i) for i in range(ws)]
        else:
            assert o["gather"] is None
        src = 1 if ws > 1 else 0
        assert o["broadcast"] == (src, 9.0 + src)
        assert o["empty"] == [b""] * ws
        assert o["none"] is None


def test_the_hub_sends_without_waiting_for_acks():
    """The test backend's sockets have TCP_NODELAY: rank 0 sends each rank several messages in a row, and
    with Nagle's algorithm each one after the first waited for the peer's delayed ACK (~40 ms a collective on
    Linux, most of the core suite's time)."""
    out = _ok(run_ranks(w.socket_no_delay, 3))
    assert [len(v) for v in out.values()] == [2, 1, 1]
    assert all(flag for v in out.values() for flag in v), out


def test_large_payloads_go_out_of_band():
    out = _ok(run_ranks(w.collectives, 2, True))
    assert out[0]["all_gather"][1][1] == float((np.arange(3_000_000, dtype=np.float32) + 1).sum())


def test_unpicklable_object_on_one_rank_raises_everywhere():
    out = _ok(run_ranks(w.unpicklable_on_one, 3))
    for r in range(3):
        name, msg = out[r]
        assert name == "RemoteSerializationError"
        assert "rank 1" in msg and "all_gather_object" in msg and "hub" in msg and "lock" in msg


def test_different_collectives_raise_everywhere():
    out = _ok(run_ranks(w.mismatch, 2))
    for r in range(2):
        name, msg = out[r]
        assert name == "CollectiveMismatchError"
        assert "broadcast_object(src=0)" in msg and "all_gather_object()" in msg


def test_one_rank_calling_one_more_collective():
    out = _ok(run_ranks(w.extra_call, 2, backend_kwargs={"timeout": 5}))
    for r in range(2):
        name, msg = out[r]
        assert name == "CollectiveMismatchError", msg
        assert "barrier" in msg


def test_dead_peer_surfaces_within_timeout():
    out = run_ranks(w.dies_mid_collective, 3, backend_kwargs={"timeout": 6}, allow_missing=[1], timeout=60)
    for r in (0, 2):
        status, (name, msg, took) = out[r]
        assert status == "ok"
        assert name in ("CollectiveFailedError", "CollectiveTimeoutError"), msg
        assert "gather_object" in msg and "hub" in msg
        assert took < 6 + 2


def test_missing_peer_times_out_with_named_operation():
    out = run_ranks(w.never_arrives, 2, backend_kwargs={"timeout": 2}, timeout=60)
    _, (name, msg, took) = out[0]
    assert name == "CollectiveTimeoutError"
    assert "broadcast_object" in msg and "hub" in msg and "2s" in msg
    assert 1.5 < took < 5


@pytest.mark.parametrize("ws", [2, 3, 4])
@pytest.mark.parametrize("shard,mode", [("padded", "unzip"), ("uneven", "unzip"), ("blocks", "cat")])
def test_end_to_end_accuracy_matches_single_process(ws, shard, mode):
    from mmeval import Accuracy

    rng = np.random.default_rng(ws)
    n = 103  # does not divide by 2, 3 or 4
    scores = rng.random((n, 5)).astype(np.float32)
    labels = rng.integers(0, 5, n)
    expected = Accuracy(topk=(1, 3))(scores, labels)
    out = _ok(run_ranks(w.evaluate, ws, scores, labels, mode, shard))
    for r in range(ws):
        assert out[r] == expected


def test_compute_metric_error_reaches_every_rank():
    out = _ok(run_ranks(w.compute_metric_raises, 3))
    for r in range(3):
        name, msg = out[r]
        assert name == "KeyError" and "boom on the computing rank" in msg


def test_comm_stats_reporter():
    out = _ok(run_ranks(w.with_stats, 2))
    rows, report = out[0]
    ops = {(row["op"], row["peer"]): row for row in rows}
    assert ops[("all_gather_object", "all")]["calls"] == 1
    assert ops[("all_gather_object", "all")]["bytes_sent"] >= 10_000
    assert ops[("gather_object", "to 0")]["calls"] == 1
    assert "mmeval communication stats" in report and "all_gather_object" in report


def test_safe_codec_end_to_end():
    out = _ok(run_ranks(w.safe_codec_roundtrip, 2, backend_kwargs={"codec": "safe"}))
    for r in range(2):
        ranks, name, msg = out[r]
        assert ranks == [0, 1]
        assert name == "RemoteSerializationError" and "safe" in msg


def test_ranks_with_different_codecs_fail_everywhere(monkeypatch):
    out = _ok(run_ranks(w.codec_by_rank, 2, backend_kwargs={"per_rank": [{"codec": "safe"}, {"codec": "pickle"}]}))
    for name, msg in out.values():
        assert name == "CollectiveMismatchError" and "codec=safe" in msg and "codec=pickle" in msg
    monkeypatch.setenv("MMEVAL_HUB_CODEC", "safe")
    from hub_backend import HubDist

    assert HubDist(0, 1, ("127.0.0.1", 0)).codec == "safe"
    monkeypatch.setenv("MMEVAL_HUB_CODEC", "yaml")
    with pytest.raises(ValueError, match="unknown codec 'yaml'"):
        HubDist(0, 1, ("127.0.0.1", 0))
    monkeypatch.setenv("MMEVAL_HUB_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="MMEVAL_HUB_TIMEOUT"):
        HubDist(0, 1, ("127.0.0.1", 0), codec="pickle")


def test_results_rank_0_cannot_decode_fail_every_rank_quickly():
    out = _ok(run_ranks(w.undecodable_result_on_rank_1, 3, backend_kwargs={"timeout": 60}))
    for name, msg, took in out.values():
        assert name == "FrameDecodeError", msg
        assert "cannot rebuild this result here" in msg
        assert took < 30  # not the 60 s timeout


def test_world_of_one_fails_like_a_larger_world():
    from hub_backend import HubDist

    from mmeval.core.errors import RemoteSerializationError

    b = HubDist(0, 1, ("127.0.0.1", 0))
    with pytest.raises(RemoteSerializationError, match="rank 0"):
        b.all_gather_object(lambda: 1)


def _gather_ranks(backend: Any) -> Any:
    return backend.all_gather_object(backend.rank)


def test_hub_ranks_meet_whatever_ports_are_taken(monkeypatch: Any) -> None:
    """The test backend's ranks meet on a port rank 0 got from the OS: a port chosen in the parent could be
    taken before rank 0 bound it (test envs run side by side in CI: "Address already in use")."""
    import socket

    import hub_backend

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    monkeypatch.setattr(hub_backend, "free_port", lambda host="127.0.0.1": taken.getsockname()[1])
    try:
        out = hub_backend.run_ranks(_gather_ranks, 2, timeout=20)
    finally:
        taken.close()
    assert out == {0: ("ok", [0, 1]), 1: ("ok", [0, 1])}
