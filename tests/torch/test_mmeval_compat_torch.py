"""MMEval 0.2.1's torch import paths resolve to mmeval-torch's classes, and work as MMEval users wrote them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import mmeval_torch
from mmeval.core import dist, dist_backends
from mmeval.testing.ranks import free_port


@pytest.fixture(autouse=True)
def _fresh_registry():
    dist._reset_for_tests()
    yield
    dist._reset_for_tests()


def test_mmeval_paths_are_the_plugins_classes():
    from mmeval.core.dist_backends.torch_cpu import TorchCPUDist
    from mmeval.core.dist_backends.torch_cuda import TorchCUDADist

    assert TorchCPUDist is mmeval_torch.TorchCPUDist is dist_backends.TorchCPUDist
    assert TorchCUDADist is mmeval_torch.TorchCUDADist is dist_backends.TorchCUDADist
    assert TorchCPUDist is dist.get_dist_backend_class("torch_cpu")
    assert type(dist.get_dist_backend("torch_cpu")) is TorchCPUDist


def test_resolving_the_class_does_not_import_torch():
    code = textwrap.dedent("""
        import json, sys
        from mmeval.core.dist_backends.torch_cpu import TorchCPUDist
        from mmeval.core.dist_backends.torch_cuda import TorchCUDADist
        print(json.dumps([TorchCPUDist.__module__, "torch" in sys.modules]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["mmeval_torch.backends", False]


_RANK_PROGRAM = textwrap.dedent("""
    import json, sys
    import torch.distributed as torch_dist
    from mmeval.core.dist_backends.torch_cpu import TorchCPUDist   # as MMEval 0.2.1's tutorial has it

    rank = int(sys.argv[1])
    torch_dist.init_process_group("gloo", init_method=sys.argv[2], rank=rank, world_size=2)
    backend = TorchCPUDist()
    out = {"init": backend.is_initialized, "rank": backend.rank, "ws": backend.world_size,
           "gathered": backend.all_gather_object({"r": rank}),
           "bcast": backend.broadcast_object("from0" if rank == 0 else None, 0)}
    torch_dist.destroy_process_group()
    print(json.dumps(out))
""")


def test_the_mmeval_path_class_runs_collectives_over_two_gloo_ranks():
    init = f"tcp://127.0.0.1:{free_port()}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RANK_PROGRAM, str(r), init],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in range(2)
    ]
    outs = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=180)
        finally:
            p.kill()
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    for rank, out in enumerate(outs):
        assert out == {"init": True, "rank": rank, "ws": 2, "gathered": [{"r": 0}, {"r": 1}], "bcast": "from0"}
