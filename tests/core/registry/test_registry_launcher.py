"""A launcher started several processes but the backend in use is not distributed (issue 16, item 2).

Each test starts real processes with the environment a launcher gives its ranks (torchrun, MPI launchers,
SLURM's srun, horovodrun) and runs a whole evaluation in each: every rank must warn once, naming the
variables it saw and what to install or initialise; a single process, or a distributed backend, must not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Dict, List

import pytest

EVAL = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    from mmeval import Accuracy
    from mmeval.core import dist

    backend = sys.argv[1] if len(sys.argv) > 1 else None
    acc = Accuracy(dist_backend=backend)
    rank = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    acc.add(np.array([0, 1, 1]) if rank else np.array([1, 1]), np.array([0, 1, 0]) if rank else np.array([1, 1]))
    first = acc.compute()
    second = acc.compute()  # the warning is once per process
    # what the README's sampler recipe would be given (asked after compute(): the question itself auto-selects)
    seen = list(dist.get_rank_and_world_size()) if backend is None else None
    print(json.dumps({"result": first, "backend": type(acc.dist_comm).__name__, "rank_and_world_size": seen}))
""")


def launch(env_per_rank: List[Dict[str, str]], backend: str = "") -> List[subprocess.CompletedProcess]:
    """Start one process per rank at once (as a launcher does) and wait for all."""
    procs = []
    for rank, extra in enumerate(env_per_rank):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
        for var in (
            "WORLD_SIZE",
            "RANK",
            "LOCAL_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK",
            "PMI_SIZE",
            "PMI_RANK",
            "PMIX_RANK",
            "MPI_LOCALNRANKS",
            "SLURM_NTASKS",
            "HOROVOD_SIZE",
            "HOROVOD_RANK",
        ):
            env.pop(var, None)
        env.update(extra)
        args = [sys.executable, "-c", EVAL] + ([backend, str(rank)] if backend else [])
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def warnings_in(stderr: str) -> int:
    return stderr.count(": DistributedLaunchWarning: ")


def test_torchrun_without_init_process_group_warns_once_per_rank():
    runs = launch(
        [
            {
                "WORLD_SIZE": "2",
                "RANK": str(r),
                "LOCAL_RANK": str(r),
                "LOCAL_WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29999",
            }
            for r in range(2)
        ]
    )
    for rank, run in enumerate(runs):
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["backend"] == "NonDist"
        assert warnings_in(run.stderr) == 1, run.stderr
        assert "WORLD_SIZE=2" in run.stderr and "one of several" in run.stderr
        if rank:
            assert "RANK=1" in run.stderr and "LOCAL_RANK=1" in run.stderr
        # with the README's sampler recipe (get_rank_and_world_size() answers (0, 1) here) every rank evaluates
        # the whole dataset; "its own shard" was true only of a sampler that reads RANK/WORLD_SIZE itself
        assert "its own shard only" not in run.stderr
        assert json.loads(run.stdout)["rank_and_world_size"] == [0, 1]
        assert "whole dataset on every rank" in run.stderr and "get_rank_and_world_size()" in run.stderr
        # what to do: install the torch plugin (this env has none) and initialise torch.distributed
        assert (
            "torch_cpu / torch_cuda are not installed" in run.stderr
            and "pip install ./plugins/torch_backend" in run.stderr
        )
        assert "init_process_group" in run.stderr


def test_mpi_launcher_with_the_mpi_plugin_missing_warns():
    # the variables MPICH's hydra (PMI_*) and Open MPI (OMPI_COMM_WORLD_*, PMIX_RANK) give their ranks
    runs = launch(
        [
            {"PMI_SIZE": "2", "PMI_RANK": "0", "MPI_LOCALNRANKS": "2"},
            {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "PMIX_RANK": "1"},
        ]
    )
    assert runs[0].returncode == 0 and runs[1].returncode == 0, runs[0].stderr + runs[1].stderr
    assert warnings_in(runs[0].stderr) == 1 and "PMI_SIZE=2" in runs[0].stderr and "MPI_LOCALNRANKS=2" in runs[0].stderr
    assert warnings_in(runs[1].stderr) == 1 and "OMPI_COMM_WORLD_SIZE=2" in runs[1].stderr
    assert "PMIX_RANK=1" in runs[1].stderr
    for run in runs:
        assert "mpi4py is not installed" in run.stderr and "pip install ./plugins/mpi_backend" in run.stderr


def test_mpi_plugin_disabled_is_named_as_the_cause(tmp_path):
    # mmeval-mpi4py "installed" (its entry point) but disabled by MMEVAL_DISABLE_PLUGINS
    info = tmp_path / "mmeval_mpi4py-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mmeval-mpi4py\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[mmeval.dist_backends]\nmpi4py = mmeval_mpi4py.backend:MPI4PyDist\n")
    env = {"PYTHONPATH": str(tmp_path), "MMEVAL_DISABLE_PLUGINS": "mmeval-mpi4py"}
    runs = launch([dict(env, PMI_SIZE="2", PMI_RANK=str(r)) for r in range(2)])
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert warnings_in(run.stderr) == 1
        assert "mpi4py is installed, but disabled by MMEVAL_DISABLE_PLUGINS" in run.stderr


@pytest.mark.parametrize("env", [{"SLURM_NTASKS": "4"}, {"HOROVOD_SIZE": "2", "HOROVOD_RANK": "1"}])
def test_slurm_and_horovod_variables_warn(env):
    (run,) = launch([env])
    assert run.returncode == 0, run.stderr
    assert warnings_in(run.stderr) == 1
    for var, value in env.items():
        assert f"{var}={value}" in run.stderr
    hint = "hvd.init()" if "HOROVOD_SIZE" in env else "ignore this if one process per allocation is intended"
    assert hint in run.stderr


def test_non_dist_named_explicitly_also_warns():
    runs = launch([{"WORLD_SIZE": "2", "RANK": str(r)} for r in range(2)], backend="non_dist")
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert warnings_in(run.stderr) == 1 and "was asked for by name" in run.stderr


@pytest.mark.parametrize(
    "env", [{}, {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0"}, {"SLURM_NTASKS": "1"}, {"WORLD_SIZE": "two"}]
)
def test_one_process_does_not_warn(env):
    (run,) = launch([env])
    assert run.returncode == 0, run.stderr
    assert warnings_in(run.stderr) == 0, run.stderr


def test_a_distributed_backend_in_use_does_not_warn():
    # the fixture's star backend is "active" with MMEVAL_STAR_WORLD_SIZE; a world of one needs no peer
    (run,) = launch([{"WORLD_SIZE": "2", "RANK": "0", "MMEVAL_STAR_WORLD_SIZE": "1"}], backend="star")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["backend"] == "StarDist"
    assert warnings_in(run.stderr) == 0, run.stderr


# --- the warning describes what it saw (issue 23, item 3) -------------------------------------------------------


def test_non_dist_named_while_a_runtime_is_active_says_that_runtime_is_active():
    # star's runtime is "active" (its detect() is true): non_dist was a choice, not a missing initialisation
    runs = launch(
        [{"WORLD_SIZE": "2", "RANK": str(r), "MMEVAL_STAR_WORLD_SIZE": "2"} for r in range(2)], backend="non_dist"
    )
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert warnings_in(run.stderr) == 1, run.stderr
        assert "'non_dist' was asked for by name" in run.stderr
        assert "star: its runtime is active in this process" in run.stderr, run.stderr
        assert "not active" not in run.stderr


def _stub_module(root, name: str) -> None:
    """A package ``name`` that find_spec finds and whose import leaves a marker file (it must not be imported)."""
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"open({str(root / (name + '.imported'))!r}, 'w').close()\n")


def test_mpi_launcher_with_mpi4py_importable_does_not_advise_reinstalling_it(tmp_path):
    _stub_module(tmp_path, "mpi4py")
    runs = launch([{"PYTHONPATH": str(tmp_path), "PMI_SIZE": "2", "PMI_RANK": str(r)} for r in range(2)])
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert warnings_in(run.stderr) == 1, run.stderr
        assert "install mpi4py built for" not in run.stderr, run.stderr
        assert "the mpi4py module is installed here (found, not imported by this process)" in run.stderr, run.stderr
        assert "pip install ./plugins/mpi_backend" in run.stderr  # what is really missing: the plugin
    assert not (tmp_path / "mpi4py.imported").exists()  # the warning looked, it did not import


def test_mpi_launcher_without_mpi4py_says_it_is_missing(tmp_path):
    runs = launch([{"PMI_SIZE": "2", "PMI_RANK": str(r)} for r in range(2)])
    for run in runs:
        assert "the mpi4py module is not installed: install mpi4py built for the MPI library" in run.stderr, run.stderr


def test_torchrun_with_torch_imported_but_no_group_says_so(tmp_path):
    """torch imported by the script, no process group: the advice is init_process_group, and says what it saw."""
    _stub_module(tmp_path, "torch")
    env = [{"PYTHONPATH": str(tmp_path), "WORLD_SIZE": "2", "RANK": str(r)} for r in range(2)]
    procs = []
    code = "import torch\n" + EVAL
    for extra in env:
        full = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
        full.update(extra)
        procs.append(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)
        )
    for run in procs:
        assert run.returncode == 0, run.stderr
        # the torch plugin is not installed here: what its runtime does is not known, only that torch was imported
        assert "the torch module is imported by this process" in run.stderr, run.stderr
        assert "init_process_group" in run.stderr
