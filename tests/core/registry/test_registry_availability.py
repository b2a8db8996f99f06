"""Installed and loadable is not usable here (issue 16, items 6-7).

The repository's plugins are put on ``sys.path`` from their source trees, with a dist-info carrying their
entry points (the same metadata ``pip install ./plugins/...`` writes), in child processes. The core env has
none of torch, mpi4py or Horovod, so every in-tree backend loads but cannot run; where a framework *is*
importable (a dev venv), the assertions follow what the child process finds.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Dict

import pytest

from mmeval.core.dist_backends import BaseDistBackend, NonDist

REPO = pathlib.Path(__file__).resolve().parents[3]

PLUGINS = {
    "mmeval-torch": (
        "torch_backend",
        {"torch_cpu": "mmeval_torch.backends:TorchCPUDist", "torch_cuda": "mmeval_torch.backends:TorchCUDADist"},
    ),
    "mmeval-mpi4py": ("mpi_backend", {"mpi4py": "mmeval_mpi4py.backend:MPI4PyDist"}),
    "mmeval-horovod": (
        "horovod_backend",
        {
            "tf_horovod": "mmeval_horovod.backends:TFHorovodDist",
            "torch_horovod": "mmeval_horovod.backends:TorchHorovodDist",
        },
    ),
}


@pytest.fixture
def plugin_env(tmp_path) -> Dict[str, str]:
    """PYTHONPATH with the in-tree plugins' sources and their entry-point metadata; fixture plugins disabled."""
    for dist_name, (_src, eps) in PLUGINS.items():
        info = tmp_path / f"{dist_name.replace('-', '_')}-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 0.1.0\n")
        lines = "".join(f"{name} = {value}\n" for name, value in eps.items())
        (info / "entry_points.txt").write_text("[mmeval.dist_backends]\n" + lines)
    paths = [str(tmp_path)] + [str(REPO / "plugins" / src / "src") for src, _eps in PLUGINS.values()]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["MMEVAL_DISABLE_PLUGINS"] = "mmeval-fixture-plugin,mmeval-fixture-rival"
    return env


def child(code: str, env: Dict[str, str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


PROBE = """
    import importlib, importlib.util, json
    def importable(mod):
        try:
            importlib.import_module(mod)
            return True
        except Exception:
            return False
    torch_ok = importable("torch")
    cuda_ok = torch_ok and __import__("torch").cuda.is_available()
    print(json.dumps({"torch": torch_ok, "cuda": cuda_ok, "mpi4py": importlib.util.find_spec("mpi4py") is not None,
                      "horovod.torch": importable("horovod.torch"),
                      "horovod.tensorflow": importable("horovod.tensorflow")}))
"""


def test_default_availability_is_usable():
    assert BaseDistBackend.availability() is None and NonDist.availability() is None


def test_in_tree_backends_say_why_they_cannot_run_here(plugin_env):
    have = child(PROBE, plugin_env)
    out = child(
        """
        import json, sys
        from mmeval.core.dist import get_dist_backend_class
        names = ["torch_cpu", "torch_cuda", "mpi4py", "torch_horovod", "tf_horovod"]
        reasons = {n: get_dist_backend_class(n).availability() for n in names}
        print(json.dumps({"reasons": reasons, "mpi_started": "mpi4py.MPI" in sys.modules}))
    """,
        plugin_env,
    )
    reasons = out["reasons"]
    assert out["mpi_started"] is False  # availability never imports mpi4py.MPI (MPI_Init)
    assert (reasons["torch_cpu"] is None) == have["torch"]
    assert (reasons["torch_cuda"] is None) == have["cuda"]
    if not have["cuda"]:
        assert "use torch_cpu" in reasons["torch_cuda"] or "torch does not import" in reasons["torch_cuda"]
    assert (reasons["mpi4py"] is None) == have["mpi4py"]
    if not have["mpi4py"]:
        assert "pip install mpi4py" in reasons["mpi4py"]
    for name, module in (("torch_horovod", "horovod.torch"), ("tf_horovod", "horovod.tensorflow")):
        assert (reasons[name] is None) == have[module]
        if not have[module]:
            assert module in reasons[name] and "build" in reasons[name]


def test_torch_cuda_without_cuda_refuses_at_construction(plugin_env):
    """Built directly or through the registry, before any collective; torch_cpu is named as the way out."""
    have = child(PROBE, plugin_env)
    if have["cuda"]:
        out = child(
            """
            import json
            from mmeval.core.dist import get_dist_backend
            print(json.dumps({"built": type(get_dist_backend("torch_cuda")).__name__}))
        """,
            plugin_env,
        )
        assert out == {"built": "TorchCUDADist"}
        return
    out = child(
        """
        import json, sys
        from mmeval.core.dist import get_dist_backend
        from mmeval.core.errors import BackendLoadError
        from mmeval_torch import TorchCUDADist
        try:
            TorchCUDADist()
            direct = None
        except RuntimeError as exc:
            direct = str(exc)
        try:
            get_dist_backend("torch_cuda")
            registry = None
        except BackendLoadError as exc:
            registry = str(exc)
        from mmeval import Accuracy
        acc = Accuracy(dist_backend="torch_cuda")  # naming it is fine; using it says why it cannot run
        acc.add([1, 0], [1, 1])
        try:
            acc.compute()
            computed = None
        except BackendLoadError as exc:
            computed = str(exc)
        print(json.dumps({"direct": direct, "registry": registry, "computed": computed}))
    """,
        plugin_env,
    )
    for where in ("direct", "registry", "computed"):
        msg = out[where]
        assert msg is not None, where
        assert "torch_cuda" in msg and ("use torch_cpu" in msg or "torch does not import" in msg), msg
        assert "peer" not in msg
    assert "cannot run on this machine" in out["registry"]


def test_backends_check_separates_unusable_from_broken(plugin_env):
    have = child(PROBE, plugin_env)
    proc = subprocess.run(
        [sys.executable, "-m", "mmeval", "backends", "--check", "--json", "--timeout", "120"],
        capture_output=True,
        text=True,
        env=plugin_env,
        timeout=600,
    )
    rows = {r["name"]: r for r in json.loads(proc.stdout)["backends"]}
    for name in ("torch_cpu", "torch_cuda", "mpi4py", "torch_horovod", "tf_horovod"):
        row = rows[name]
        assert row["check"] == "ok", row  # installed and loadable
        assert row["usable"] is (row["unusable_reason"] is None)
        # torch_cuda where torch is installed but CUDA is not: it lacks its hardware, which does not fail --check
        lacks_gpu = name == "torch_cuda" and have["torch"] and not have["cuda"]
        assert row["status"] == ("ok" if row["usable"] else "no-hardware" if lacks_gpu else "unusable")
    assert rows["torch_cuda"]["usable"] is have["cuda"]
    assert rows["non_dist"]["usable"] is True
    all_usable = all(r["usable"] for r in rows.values() if r["status"] not in ("disabled", "no-hardware"))
    assert proc.returncode == (0 if all_usable else 3), proc.stderr
    table = subprocess.run(
        [sys.executable, "-m", "mmeval", "backends", "--check"],
        capture_output=True,
        text=True,
        env=plugin_env,
        timeout=600,
    )
    lines = {line.split()[0]: line.split() for line in table.stdout.splitlines() if line[:1].isalpha()}
    assert "usable" in table.stdout.splitlines()[1]
    assert lines["torch_cuda"][1:3] == (["ok", "yes"] if have["cuda"] else [rows["torch_cuda"]["status"], "no"])
    assert table.returncode == proc.returncode
