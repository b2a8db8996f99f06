"""Object collectives of torch_cpu (gloo) and torch_cuda (NCCL) between real processes.

Every test runs its check on all ranks of a shared group (see conftest.py)
and asserts on what every rank reported. The checks themselves live in
``_workers.py``; they compare received objects field by field on each rank.
"""

from __future__ import annotations

from typing import Any

import pytest
from _torch_workers import values


def _mro_has(report: dict, name: str) -> bool:
    return name in report["mro"]


def test_rank_world_size_and_detection(ranks: Any) -> None:
    reports = values(ranks.run("info"))
    for rank, report in enumerate(reports):
        assert report["rank"] == rank
        assert report["world_size"] == ranks.world_size
        assert report["is_initialized"] is True
        assert report["shared_sequence"] is True, "backends over one group must share the sequence"
        assert report["pre_init_resolved"] == "non_dist", "before init_process_group nothing is detected"
        assert report["auto"] == ranks.kind
        assert report["detect"][ranks.kind] is True
        if ranks.kind == "torch_cpu":
            assert report["detect"]["torch_cuda"] is False, "gloo is not NCCL"
        assert f"rank={rank}, world_size={ranks.world_size}" in report["repr"]


def test_conformance_suite(ranks: Any) -> None:
    done = values(ranks.run("conformance"))
    assert all(d == done[0] for d in done)
    assert "accuracy_end_to_end" in done[0]
    if ranks.world_size > 1:
        for check in ("unpicklable_on_one_rank", "question_mismatch", "poisoning", "concurrent_calls", "interrupt"):
            assert check in done[0], done[0]


def test_nested_objects_with_arrays_and_tensors(ranks: Any) -> None:
    reports = values(ranks.run("collectives", 0))
    assert all(r["ranks_seen"] == list(range(ranks.world_size)) for r in reports)


def test_large_payload_64mb(ranks: Any) -> None:
    reports = values(ranks.run("collectives", 64 << 20, timeout=300))
    assert all(r["ranks_seen"] == list(range(ranks.world_size)) for r in reports)


def test_generic_transport_paths(ranks: Any) -> None:
    """The separate-send-buffer all-gather and the dist.gather path (used for MPI, UCC, ...), run over gloo."""
    reports = values(ranks.run("collectives", 3 << 20, True))
    assert all(r["ranks_seen"] == list(range(ranks.world_size)) for r in reports)
    sizes = values(ranks.run("uneven_payloads", True))
    assert all(s == sizes[0] for s in sizes)


def test_empty_payloads(ranks: Any) -> None:
    assert all(n > 0 for n in values(ranks.run("empty_payloads")))


def test_uneven_payload_sizes(ranks: Any) -> None:
    sizes = values(ranks.run("uneven_payloads"))
    assert all(s == sizes[0] for s in sizes)


def test_subgroups(ranks: Any) -> None:
    reports = values(ranks.run("subgroups"))
    ws = ranks.world_size
    for rank, report in enumerate(reports):
        members = list(range(rank % 2, ws, 2))
        assert report["group"] == ("even" if rank % 2 == 0 else "odd")
        assert (report["group_rank"], report["group_size"]) == (members.index(rank), len(members))
        if ws > 1:
            non_member = report["non_member"]
            assert non_member["type"] == "RuntimeError"
            assert "not a member" in non_member["message"] and ranks.kind in non_member["message"]
        assert report["wrong_device"]["type"] == "RuntimeError"
        assert "the process group has no backend for" in report["wrong_device"]["message"]
    assert len({str(r["result"]) for r in reports}) == 1


def test_unpicklable_object_on_one_rank_raises_everywhere(ranks: Any) -> None:
    if ranks.world_size == 1:
        pytest.skip("one rank: the object is copied locally and the pickling error is raised as is")
    bad_rank = ranks.world_size - 1
    reports = values(ranks.run("unpicklable", bad_rank))
    for report in reports:
        for op in ("all_gather", "gather", "broadcast"):
            exc = report[op]
            assert exc["type"] == "RemoteSerializationError", exc
            assert _mro_has(exc, "DistCommunicationError")
            assert f"rank {bad_rank}" in exc["message"] and ranks.kind in exc["message"]
        assert "lock" in report["all_gather"]["message"]
        assert "all_gather_object" in report["all_gather"]["message"]
        assert "gather_object" in report["gather"]["message"]
        assert "broadcast_object" in report["broadcast"]["message"]


def test_mismatched_collectives_raise_everywhere(ranks: Any) -> None:
    if ranks.world_size == 1:
        pytest.skip("one rank cannot disagree with itself")
    reports = values(ranks.run("mismatch"))
    for report in reports:
        for case in ("op_vs_op", "barrier_vs_all_gather"):
            exc = report[case]
            assert exc["type"] == "CollectiveMismatchError", exc
            assert ranks.kind in exc["message"]
        assert "broadcast_object" in report["op_vs_op"]["message"]
        assert "all_gather_object" in report["op_vs_op"]["message"]
        assert report["dst_vs_dst"]["type"] == "CollectiveMismatchError"
        assert "dst=0" in report["dst_vs_dst"]["message"] and "dst=1" in report["dst_vs_dst"]["message"]


def test_compute_metric_error_reaches_every_rank(ranks: Any) -> None:
    reports = values(ranks.run("metric_error"))
    for report in reports:
        assert report["type"] == "ValueError"
        assert report["message"] == "deliberate failure in compute_metric over 20 results"
