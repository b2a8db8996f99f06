"""The conformance suite against the third-party fixture backend and the framed hub backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hub_backend import free_port, run_ranks

STAR_PROGRAM = """
import json
from mmeval.core.dist import get_dist_backend
from mmeval.testing.conformance import check_backend
backend = get_dist_backend()          # auto-selection: star's detect() sees MMEVAL_STAR_WORLD_SIZE
print(json.dumps({"backend": type(backend).__name__, "checks": check_backend(backend)}))
"""


@pytest.mark.parametrize("ws", [1, 2, 3])
def test_third_party_five_member_backend_conforms(ws):
    port = free_port()
    procs = []
    for rank in range(ws):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
        env.update(
            MMEVAL_STAR_ADDR=f"127.0.0.1:{port}",
            MMEVAL_STAR_RANK=str(rank),
            MMEVAL_STAR_WORLD_SIZE=str(ws),
            MMEVAL_STAR_TIMEOUT="60",
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", STAR_PROGRAM], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            p.kill()
    for o in outs:
        assert o["backend"] == ("StarDist" if ws > 1 else "NonDist")
        assert "accuracy_end_to_end" in o["checks"] and "unpicklable_on_one_rank" not in o["checks"]


def _conformance(backend):
    from hub_backend import HubDist

    from mmeval.testing.conformance import check_backend

    def fresh(timeout):
        # a new group: rank 0 picks a port, the old group tells everyone
        port = backend.broadcast_object(free_port() if backend.rank == 0 else None, src=0)
        return HubDist(backend.rank, backend.world_size, ("127.0.0.1", port), timeout=timeout)

    return check_backend(backend, fresh=fresh)


@pytest.mark.parametrize("ws", [1, 2, 4])
def test_framed_backend_conforms_including_faults(ws):
    out = run_ranks(_conformance, ws, timeout=240)
    for status, value in out.values():
        assert status == "ok", value
        assert "unpicklable_on_one_rank" in value
        if ws > 1:
            for check in ("question_mismatch", "poisoning", "concurrent_calls", "interrupt"):
                assert check in value, value
