"""all_reduce / reduce in the backend contract: non_dist, the framed hub backend, a five-member third-party backend."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hub_backend import free_port, run_ranks
from reduction_workers import check_reductions, framed_guarantees, mismatches, native_hub_reductions, reductions

from mmeval.core.dist_backends import NonDist
from mmeval.core.dist_backends.base_backend import REDUCE_OPS

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/core: reduction_workers


def test_reduce_ops_constant():
    assert REDUCE_OPS == ("sum", "min", "max")


def test_non_dist_is_identity_on_a_copy():
    backend = NonDist()
    check_reductions({0: reductions(backend)})
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    for out in (backend.all_reduce(arr, op="max"), backend.reduce(arr, op="min", dst=0)):
        assert out is not arr and out.dtype == arr.dtype and out.shape == arr.shape
        assert not np.shares_memory(out, arr)


@pytest.mark.parametrize(
    "array, op, error, words",
    [
        ([1, 2], "sum", TypeError, ["non_dist.all_reduce", "numpy.ndarray", "numpy.asarray"]),
        (np.zeros(2, bool), "sum", TypeError, ["bool", "astype"]),
        (np.zeros(2, complex), "sum", TypeError, ["complex"]),
        (np.array([object()]), "sum", TypeError, ["object"]),
        (np.array(["a"]), "sum", TypeError, ["integer, unsigned or float"]),
        (np.zeros(2), "mean", ValueError, ["op='mean'", "'sum', 'min', 'max'"]),
        (np.zeros(2), None, ValueError, ["op=None"]),
    ],
)
def test_refused_inputs_name_backend_call_and_fix(array, op, error, words):
    with pytest.raises(error) as info:
        NonDist().all_reduce(array, op=op)
    for w in words:
        assert w in str(info.value)


def test_non_dist_reduce_dst_must_be_zero():
    with pytest.raises(ValueError, match=r"non_dist.reduce: dst=1 is not a rank"):
        NonDist().reduce(np.zeros(2), dst=1)


@pytest.mark.parametrize("ws", [1, 2, 3])
def test_hub_backend_reductions_exact_on_every_rank(ws):
    out = run_ranks(reductions, ws, timeout=120)
    assert all(s == "ok" for s, _ in out.values()), out
    check_reductions({r: v for r, (_, v) in out.items()})


def _check_mismatch_outcomes(results, ws):
    for rank, out in results.items():
        last = rank == ws - 1
        for field, shown in (
            ("shape", "shape: rank 0=(3,)"),
            ("dtype", "dtype: rank 0=<f8"),
            ("op", "op: rank 0='sum'"),
            ("dst", "dst: rank 0="),
        ):
            kind, message = out[field]
            assert kind == "CollectiveMismatchError", (rank, field, message)
            assert shown in message and f"rank {ws - 1}=" in message, (rank, field, message)
        kind, message = out["bool_on_one_rank"]
        assert (kind, "bool" in message) == (("TypeError", True) if last else ("CollectiveMismatchError", True)), (
            message
        )
        kind, message = out["bad_op_on_one_rank"]
        assert kind == ("ValueError" if last else "CollectiveMismatchError") and "'mean'" in message, message
        assert out["after"] == [sum(range(ws))]


@pytest.mark.parametrize("ws", [2, 3])
def test_hub_backend_mismatch_raises_on_every_rank_and_group_stays_usable(ws):
    out = run_ranks(mismatches, ws, timeout=120)
    assert all(s == "ok" for s, _ in out.values()), out
    _check_mismatch_outcomes({r: v for r, (_, v) in out.items()}, ws)


STAR_PROGRAM = """
import pickle, sys
from mmeval.core.dist import get_dist_backend
import reduction_workers as w
backend = get_dist_backend()
out = {"backend": type(backend).__name__, "reductions": w.reductions(backend), "mismatches": w.mismatches(backend)}
sys.stdout.buffer.write(pickle.dumps(out).hex().encode() + b"\\n")
"""


@pytest.mark.parametrize("ws", [2, 3])
def test_third_party_five_member_backend_gets_reductions(ws):
    import pickle

    port = free_port()
    procs = []
    for rank in range(ws):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
        env.update(
            MMEVAL_STAR_ADDR=f"127.0.0.1:{port}",
            MMEVAL_STAR_RANK=str(rank),
            MMEVAL_STAR_WORLD_SIZE=str(ws),
            MMEVAL_STAR_TIMEOUT="60",
            PYTHONPATH=os.pathsep.join([HERE, env.get("PYTHONPATH", "")]),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", STAR_PROGRAM], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        )
    outs = {}
    try:
        for rank, p in enumerate(procs):
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err.decode()
            outs[rank] = pickle.loads(bytes.fromhex(out.decode().strip().splitlines()[-1]))
    finally:
        for p in procs:
            p.kill()
    assert {o["backend"] for o in outs.values()} == {"StarDist"}
    check_reductions({r: o["reductions"] for r, o in outs.items()})
    _check_mismatch_outcomes({r: o["mismatches"] for r, o in outs.items()}, ws)


def test_hub_backend_reductions_keep_the_framed_guarantees():
    from mmeval.core.wire import SLOT_SIZE

    ws = 3
    out = run_ranks(framed_guarantees, ws, timeout=120)
    assert all(s == "ok" for s, _ in out.values()), out
    for rank, (_, o) in out.items():
        # a small array rides in the slot: one collective, the slot's bytes only
        (small,) = o["small"]
        assert (small["op"], small["calls"], small["bytes_sent"]) == ("all_reduce", 1, SLOT_SIZE)
        # a large one: the slot, then 800 kB to the root (the default payload stage gathers the raw bytes)
        (large,) = o["large"]
        assert (large["op"], large["peer"], large["calls"]) == ("reduce", "to 1", 1)
        if rank == 1:
            assert large["bytes_received"] == SLOT_SIZE * (ws - 1) + 800_000 * (ws - 1)
        else:
            assert large["bytes_sent"] == SLOT_SIZE + 800_000
        kind, message = o["question"]
        assert kind == "CollectiveMismatchError" and "metric: rank 0=Metric0, rank 1=Metric1" in message
        if rank < ws - 1:
            assert o["timeout"][0] == "CollectiveTimeoutError" and "all_reduce" in o["timeout"][1]
            kind, message = o["poisoned"]
            assert kind == "GroupPoisonedError" and "all_reduce refused" in message


def _conformance_names(backend):
    from mmeval.testing.conformance import check_backend

    return check_backend(backend)


@pytest.mark.parametrize("ws", [1, 3])
def test_conformance_suite_holds_backends_to_the_reductions(ws):
    out = run_ranks(_conformance_names, ws, timeout=180)
    for status, names in out.values():
        assert status == "ok", names
        assert "reductions" in names and "reduction_mismatch" in names


@pytest.mark.parametrize("ws", [2, 3])
def test_every_accepted_dtype_and_nan_reduce_at_large_sizes_over_a_limited_native_reduction(ws):
    # a native reduction lacking int16/uint16/uint32/uint64/big-endian/longdouble and dropping NaN in min/max
    # (gloo's): the core converts or takes the byte path; the group stays usable
    out = run_ranks(native_hub_reductions, ws, timeout=240)
    for rank, (status, value) in out.items():
        assert status == "ok", value
        assert value["checks"] == {"reduction_dtypes": "ok", "reduction_nan": "ok"}, (rank, value)
        assert value["poisoned"] is None
        assert value["native_calls"] > 0  # the declared pairs (and the integers converted to them) stay native
