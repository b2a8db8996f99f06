"""The mmeval CLI, import cost and the core's independence from frameworks."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mmeval

CORE_SRC = pathlib.Path(mmeval.__file__).parent


def mmeval_cli(*args, env=None):
    full = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "mmeval", *args], capture_output=True, text=True, timeout=120, env=full
    )


def test_backends_table():
    proc = mmeval_cli("backends")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"mmeval-core {mmeval.__version__};" in out and "plugin API" not in out
    lines = {line.split()[0]: line for line in out.splitlines() if line and not line.startswith((" ", "-"))}
    assert "ok" in lines["star"] and "mmeval-fixture-plugin 1.2.3" in lines["star"]
    assert "mmeval-core<0.4,>=0.3" in lines["star"]
    assert "conflict" in lines["twin"] and "mmeval-fixture-rival" in lines["twin"]
    assert "invalid" in lines["Star-Invalid"]


def test_backends_json_and_check():
    proc = mmeval_cli("backends", "--json", "--check", "--timeout", "60")
    assert proc.returncode == 1, proc.stderr  # broken fixture backends: the same exit code as the table's
    data = json.loads(proc.stdout)
    rows = {r["name"]: r for r in data["backends"]}
    assert data["mmeval_core"] == mmeval.__version__ and "plugin_api" not in data
    assert rows["star"]["check"] == "ok" and rows["star"]["loaded"].endswith("StarDist")
    assert rows["star_broken"]["status"] == "failed" and "libstar_native" in rows["star_broken"]["error"]
    assert rows["star_notabackend"]["status"] == "failed"
    assert rows["twin"]["status"] == "conflict" and len(rows["twin"]["providers"]) == 2
    assert rows["non_dist"]["source"] == "builtin"


def test_check_exit_code_reports_failures():
    assert mmeval_cli("backends", "--check").returncode == 1
    ok = mmeval_cli("backends", "--check", env={"MMEVAL_DISABLE_PLUGINS": "mmeval-fixture-plugin,mmeval-fixture-rival"})
    assert ok.returncode == 0, ok.stdout


def test_check_times_out_a_hanging_import(tmp_path):
    (tmp_path / "hang_backend.py").write_text("import time\ntime.sleep(600)\n")
    info = tmp_path / "hang-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hang\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[mmeval.dist_backends]\nhang = hang_backend:Hang\n")
    proc = mmeval_cli(
        "backends",
        "--json",
        "--check",
        "--timeout",
        "3",
        env={"PYTHONPATH": str(tmp_path), "MMEVAL_DISABLE_PLUGINS": "mmeval-fixture-plugin"},
    )
    rows = {r["name"]: r for r in json.loads(proc.stdout)["backends"]}
    assert rows["hang"]["check"] == "timeout" and "3s" in rows["hang"]["error"]


def test_console_script_is_installed():
    script = pathlib.Path(sys.executable).parent / "mmeval"
    proc = subprocess.run([str(script), "backends", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout)["backends"]


def test_import_mmeval_is_light():
    code = (
        "import sys, mmeval; mmeval.core.dist.list_all_backends(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'pluggy', 'torch', 'mpi4py', 'horovod', 'tensorflow')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


FORBIDDEN = {"torch", "tensorflow", "horovod", "mpi4py"}


def test_core_source_never_imports_frameworks():
    for path in CORE_SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path} imports {name}"


def test_py_typed_shipped():
    assert (CORE_SRC / "py.typed").exists()


@pytest.mark.parametrize("module", ["mmeval.core.dist", "mmeval.core.serialization", "mmeval.core.hooks"])
def test_modules_documented(module):
    __import__(module)
    assert sys.modules[module].__doc__


@pytest.mark.parametrize("how", ["console_script", "module"])
def test_version_flag(how):
    if how == "module":
        proc = mmeval_cli("--version")
    else:
        script = pathlib.Path(sys.executable).parent / "mmeval"
        proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"mmeval-core {mmeval.__version__}"


def test_dir_lists_only_the_public_api():
    names = dir(mmeval)
    assert names == sorted(mmeval.__all__)
    for private in ("Any", "List", "TYPE_CHECKING", "importlib", "annotations", "version", "cli"):
        assert private not in names
    assert not hasattr(mmeval, "TYPE_CHECKING") and not hasattr(mmeval, "Any")
    assert mmeval.Accuracy.__name__ == "Accuracy"  # lazy attributes still resolve


def test_readme_shows_the_order_list_all_backends_returns():
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()  # the repository's, not the package's
    (line,) = [ln for ln in readme.splitlines() if "print(list_all_backends())" in ln]
    shown = ast.literal_eval(line[line.index("[") :])
    assert shown == sorted(shown)  # list_all_backends() returns sorted names
    from mmeval.core.dist import list_all_backends

    assert list_all_backends() == sorted(list_all_backends())


def test_check_reports_backends_that_cannot_run_here():
    env = {"MMEVAL_DISABLE_PLUGINS": "mmeval-fixture-plugin"}  # the rival's backends all load
    proc = mmeval_cli("backends", "--check", "--json", env=env)
    rows = {r["name"]: r for r in json.loads(proc.stdout)["backends"]}
    assert rows["nodevice"]["check"] == "ok" and rows["nodevice"]["usable"] is False
    assert rows["nodevice"]["status"] == "unusable" and "no fixture accelerator" in rows["nodevice"]["error"]
    assert "no fixture accelerator" in rows["nodevice"]["unusable_reason"]
    assert rows["summit"]["usable"] is True and rows["summit"]["status"] == "ok"
    assert proc.returncode == 3  # every backend loads, one cannot run here
    table = mmeval_cli("backends", "--check", env=env)
    assert table.returncode == 3
    lines = {ln.split()[0]: ln.split() for ln in table.stdout.splitlines() if ln[:1].isalpha()}
    assert lines["nodevice"][1:3] == ["unusable", "no"] and lines["summit"][1:3] == ["ok", "yes"]
    assert "cannot run on this machine" in table.stdout
    # without --check nothing is loaded, so nothing is said about usability
    plain = mmeval_cli("backends", env=env)
    assert plain.returncode == 0 and "usable" not in plain.stdout


# --- --check under attack (issue 20, item 9) and on a CPU machine (issue 23, item 4) ----------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("--timeout", "nan"),
        ("--timeout", "inf"),
        ("--timeout", "0"),
        ("--timeout", "-1"),
        ("--timeout", "abc"),
        ("--timeout=-inf",),
    ],
)
def test_a_bad_check_timeout_is_a_one_line_usage_error(args):
    proc = mmeval_cli("backends", "--check", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "--timeout" in errors[0] and "positive" in errors[0], proc.stderr


def test_help_shows_the_timeout_default():
    proc = mmeval_cli("backends", "--help")
    assert proc.returncode == 0
    assert "default: 30" in " ".join(proc.stdout.split())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: it only waits for its (gone) parent to be reaped by init
        return pathlib.Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_check_leaves_no_orphan_of_a_plugin_that_spawns(tmp_path):
    from test_registry_isolation import hostile_env

    pidfile = tmp_path / "child.pid"
    env = hostile_env(tmp_path, "hostile_spawn", MMEVAL_FIXTURE_PIDFILE=str(pidfile))
    proc = subprocess.run(
        [sys.executable, "-m", "mmeval", "backends", "--check", "--json", "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    rows = {r["name"]: r for r in json.loads(proc.stdout)["backends"]}
    assert rows["hostile_spawn"]["check"] == "timeout"
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(pid)
    if alive:
        os.kill(pid, 9)
    assert not alive, "the plugin's child outlived mmeval backends --check"


def test_a_tiny_timeout_is_named_as_the_cause():
    env = {"MMEVAL_DISABLE_PLUGINS": "mmeval-fixture-plugin"}  # the rival's backends all load
    proc = mmeval_cli("backends", "--check", "--timeout", "0.001", env=env)
    assert proc.returncode == 1
    assert "--timeout 0.001" in proc.stdout and "every check timed out" in proc.stdout, proc.stdout
    data = json.loads(mmeval_cli("backends", "--check", "--json", "--timeout", "0.001", env=env).stdout)
    assert "--timeout" in data["note"]


def test_a_backend_lacking_its_hardware_does_not_fail_the_check(tmp_path):
    """torch_cuda without CUDA: reported, exit 0 when everything else can run (the record says it needs CUDA)."""
    pkg = tmp_path / "cudaless.py"
    pkg.write_text(
        "from mmeval.core.dist_backends import NonDist\n"
        "class NoCuda(NonDist):\n"
        "    name = 'torch_cuda'\n"
        "    @classmethod\n"
        "    def availability(cls):\n"
        "        return 'CUDA is not available: a CPU-only build'\n"
    )
    info = tmp_path / "mmeval_torch-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mmeval-torch\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[mmeval.dist_backends]\ntorch_cuda = cudaless:NoCuda\n")
    (tmp_path / "torch").mkdir()  # torch is installed (found, never imported): what is missing is the GPU
    (tmp_path / "torch" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    env = {"PYTHONPATH": str(tmp_path), "MMEVAL_DISABLE_PLUGINS": "mmeval-fixture-plugin,mmeval-fixture-rival"}
    proc = mmeval_cli("backends", "--check", "--json", env=env)
    assert proc.returncode == 0, proc.stdout
    row = {r["name"]: r for r in json.loads(proc.stdout)["backends"]}["torch_cuda"]
    assert row["usable"] is False and row["status"] == "no-hardware" and "CUDA" in row["error"]
    table = mmeval_cli("backends", "--check", env=env)
    assert table.returncode == 0 and "CUDA" in table.stdout and "not counted as a failure" in table.stdout


def test_a_reader_that_stops_early_gets_no_traceback():
    # `mmeval backends | head -1`: the reader closes the pipe early; the listing must end quietly (a
    # BrokenPipeError traceback on stderr was the bug), with the exit status Python's docs advise (1).
    # The read end is closed before the child has imported anything, so its first write meets a closed pipe.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mmeval", "backends"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
