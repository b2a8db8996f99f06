"""mmeval-horovod under real ``horovodrun --gloo`` processes (2 and 3 ranks).

The flavour comes from ``MMEVAL_HOROVOD_FLAVOUR`` (``torch`` or
``tensorflow``; the tox envs ``horovod-torch`` / ``horovod-tf`` set it), else
from what the environment has. Each world size is launched once per session
(``hvd_program.py`` runs every check on every rank and writes JSON per rank);
each check is then one test item here, asserted on every rank. Every launch
has a hard timeout and is killed, with all its processes, when it passes it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "hvd_program.py"
#: hard limit of one horovodrun launch (startup of N framework processes on 2 cores + every check)
LAUNCH_TIMEOUT = float(os.environ.get("MMEVAL_HOROVOD_TEST_TIMEOUT", "420"))
WORLD_SIZES = (2, 3)
BACKEND_NAMES = {"torch": "torch_horovod", "tensorflow": "tf_horovod"}
#: the conformance checks every rank must report as run (mmeval.testing.conformance), terminal ones included
CONFORMANCE_CHECKS = (
    "identity",
    "all_gather_object",
    "gather_object",
    "broadcast_object",
    "barrier",
    "empty_payloads",
    "large_payloads",
    "per_sample_lists",
    "accuracy_end_to_end",
    "compute_metric_error",
    "reductions",
)
TERMINAL_CHECKS = ("poisoning", "concurrent_calls", "interrupt")
FRAMEWORK_MODULES = {"torch": "torch", "tensorflow": "tensorflow"}

CHECKS = [
    "conformance",
    "runtime",
    "broadcast_none_elsewhere",
    "mixed_sizes",
    "accuracy_framework_tensors",
    "unpicklable_on_one_rank",
    "compute_metric_raises",
    "process_set",
    "two_backend_objects",
    "extra_collective",
    "native_reduction",
]


def _flavour() -> Optional[str]:
    want = os.environ.get("MMEVAL_HOROVOD_FLAVOUR", "").strip().lower()
    if want in ("tf", "tensorflow"):
        return "tensorflow"
    if want in ("torch", "pytorch"):
        return "torch"
    if want:
        raise pytest.UsageError(f"MMEVAL_HOROVOD_FLAVOUR={want!r}: use torch or tensorflow")
    for flavour in ("torch", "tensorflow"):
        if importlib.util.find_spec(FRAMEWORK_MODULES[flavour]) and importlib.util.find_spec("horovod"):
            return flavour
    return None


FLAVOUR = _flavour()
HOROVODRUN = shutil.which("horovodrun", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
#: the tox envs name their flavour: there a missing horovodrun fails the tests instead of skipping them
REQUIRED = bool(os.environ.get("MMEVAL_HOROVOD_FLAVOUR", "").strip())

pytestmark = pytest.mark.skipif(
    not REQUIRED and (FLAVOUR is None or HOROVODRUN is None),
    reason="needs horovod built for torch or tensorflow and horovodrun (tox -e horovod-torch / horovod-tf)",
)


@dataclass
class Launch:
    """The outcome of one horovodrun launch."""

    np: int
    returncode: Optional[int]
    output: str
    seconds: float
    ranks: List[Dict[str, Any]]
    timeout_ranks: List[Optional[Dict[str, Any]]]

    def describe(self) -> str:
        return f"horovodrun -np {self.np} exited {self.returncode} after {self.seconds:.1f}s; output:\n{self.output[-6000:]}"


def _kill_tree(proc: "subprocess.Popen[bytes]") -> None:
    """Stop horovodrun and every process it started (ranks may live in their own process groups)."""
    try:
        import psutil  # a horovod dependency

        children = psutil.Process(proc.pid).children(recursive=True)
    except Exception:
        children = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in [proc, *children]:
            try:
                os.kill(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            time.sleep(1)  # let the ranks go before the SIGKILL sweep


def horovodrun(
    np_: int, program: Path, args: List[str], out_dir: Path, env: Optional[Dict[str, str]] = None
) -> Tuple[Optional[int], str, float]:
    """Run ``program FLAVOUR *args`` under ``horovodrun --gloo -np np_`` on loopback, at most LAUNCH_TIMEOUT s.

    Returns (exit status or None when killed at the hard timeout, the launcher's output, seconds).
    """
    assert FLAVOUR is not None
    assert HOROVODRUN is not None, (
        f"MMEVAL_HOROVOD_FLAVOUR={FLAVOUR} but no horovodrun next to {sys.executable} or on PATH: "
        f"build Horovod with tools/build_horovod.sh {FLAVOUR}"
    )
    cmd = [
        HOROVODRUN,
        "-np",
        str(np_),
        "--gloo",
        "-H",
        f"localhost:{np_}",
        "--network-interfaces",
        "lo",
        "--start-timeout",
        "120",
        sys.executable,
        str(program),
        FLAVOUR,
        *args,
    ]
    child_env = dict(os.environ, **(env or {}))
    child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    child_env["PYTHONUNBUFFERED"] = "1"
    child_env.pop("MMEVAL_DIST_BACKEND", None)
    child_env.pop("MMEVAL_TIMEOUT", None)
    log = out_dir / "horovodrun.log"
    start = time.monotonic()
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            cmd,
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(HERE),
            env=child_env,
        )
        try:
            rc: Optional[int] = proc.wait(timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            rc = None
    output = log.read_text(errors="replace")
    if rc is None:
        output += f"\n[test harness] killed after the hard timeout of {LAUNCH_TIMEOUT:.0f}s"
    return rc, output, time.monotonic() - start


def _launch(np_: int, out_dir: Path) -> Launch:
    rc, output, seconds = horovodrun(np_, PROGRAM, [str(out_dir)], out_dir)
    ranks: List[Dict[str, Any]] = []
    timeout_ranks: List[Optional[Dict[str, Any]]] = []
    for r in range(np_):
        main, tmo = out_dir / f"rank{r}.json", out_dir / f"rank{r}.timeout.json"
        ranks.append(json.loads(main.read_text()) if main.exists() else {})
        timeout_ranks.append(json.loads(tmo.read_text()) if tmo.exists() else None)
    return Launch(np_, rc, output, seconds, ranks, timeout_ranks)


_launches: Dict[int, Launch] = {}


def _get(np_: int) -> Launch:
    if np_ not in _launches:
        out = Path(tempfile.mkdtemp(prefix=f"mmeval-horovod-np{np_}-"))
        try:
            _launches[np_] = _launch(np_, out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return _launches[np_]


def _check_on_every_rank(launch: Launch, check: str) -> List[Dict[str, Any]]:
    infos = []
    for r, results in enumerate(launch.ranks):
        if not results:
            pytest.fail(f"rank {r} wrote no results. {launch.describe()}")
        res = results.get(check)
        assert res is not None, f"rank {r} did not run {check!r}"
        assert res["ok"], f"{check} failed on rank {r} of {launch.np}:\n{res['error']}"
        infos.append(res["info"])
    return infos


@pytest.mark.parametrize("np_", WORLD_SIZES, ids=lambda n: f"np{n}")
def test_launch_exits_cleanly(np_: int) -> None:
    """Every rank finished every check (the timeout one too) and horovodrun exited 0 in time."""
    launch = _get(np_)
    assert launch.returncode == 0, launch.describe()
    assert all(launch.ranks) and all(launch.timeout_ranks), launch.describe()


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("np_", WORLD_SIZES, ids=lambda n: f"np{n}")
def test_check(np_: int, check: str) -> None:
    """One check of hvd_program.py, passed on every rank."""
    infos = _check_on_every_rank(_get(np_), check)
    if check == "conformance":
        # every check of the suite ran, the terminal ones (each on a fresh group) included
        want = {
            *CONFORMANCE_CHECKS,
            "unpicklable_on_one_rank",
            "question_mismatch",
            "reduction_mismatch",
            *TERMINAL_CHECKS,
        }
        for r, info in enumerate(infos):
            assert want <= set(info["done"]), f"rank {r} did not run {sorted(want - set(info['done']))}"
    elif check == "runtime":
        assert [i["rank"] for i in infos] == list(range(np_))
        assert {i["world_size"] for i in infos} == {np_}
        assert {i["auto"] for i in infos} == {BACKEND_NAMES[FLAVOUR or "torch"]}
    elif check == "unpicklable_on_one_rank":
        # the same error, naming the failing rank, on every rank
        assert len({tuple(i["messages"]) for i in infos}) == 1, infos
        assert f"rank {np_ - 1} could not serialize" in infos[0]["messages"][0]
        assert "rank 0 could not serialize" in infos[0]["messages"][1]
    elif check == "compute_metric_raises":
        assert {(i["type"], i["message"]) for i in infos} == {
            ("ValueError", "compute_metric failed: 42 is not a score")
        }
        assert [i["type2"] for i in infos] == ["_Unpicklable"] + ["RemoteMetricError"] * (np_ - 1)
    elif check == "process_set":
        if np_ < 3:
            assert all(i == {"skipped": "needs 3 processes"} for i in infos)
        else:
            assert [i["member"] for i in infos] == [r in (0, np_ - 1) for r in range(np_)]
    elif check == "accuracy_framework_tensors":
        assert all(i["padded"] == i["expected"] == i["uneven"] == i["blocks"] for i in infos)


@pytest.mark.parametrize("np_", WORLD_SIZES, ids=lambda n: f"np{n}")
def test_timeout_raises_on_every_rank(np_: int) -> None:
    """No rank's operation can match: every rank raises TimeoutError after the timeout, nobody hangs; the next
    call on the group is refused (GroupPoisonedError)."""
    launch = _get(np_)
    for r, res in enumerate(launch.timeout_ranks):
        assert res is not None, f"rank {r} never finished the timeout check. {launch.describe()}"
        assert res["timeout"]["ok"], f"timeout check failed on rank {r}:\n{res['timeout']['error']}"
        assert "did not complete within 2s" in res["timeout"]["info"]["message"]


def test_import_is_cheap_and_backends_are_listed() -> None:
    """Importing mmeval_horovod imports neither horovod nor a framework; both names are installed."""
    code = (
        "import sys, json, mmeval_horovod\n"
        "from mmeval.core.dist import list_all_backends, get_dist_backend_class\n"
        "heavy = [m for m in ('horovod', 'torch', 'tensorflow') if m in sys.modules]\n"
        "names = list_all_backends()\n"
        "detect = {n: get_dist_backend_class(n).detect() for n in ('torch_horovod', 'tf_horovod')}\n"
        "heavy2 = [m for m in ('horovod', 'torch', 'tensorflow') if m in sys.modules]\n"
        "print(json.dumps([heavy, names, detect, heavy2]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    heavy, names, detect, heavy2 = json.loads(out.stdout.strip().splitlines()[-1])
    assert heavy == [] and heavy2 == []
    assert "torch_horovod" in names and "tf_horovod" in names
    assert detect == {"torch_horovod": False, "tf_horovod": False}


def test_not_initialized_without_horovodrun() -> None:
    """Outside horovodrun, before hvd.init(): is_initialized is False and rank names the backend and the fix."""
    name = BACKEND_NAMES[FLAVOUR or "torch"]
    code = (
        "import json\n"
        "from mmeval.core.dist import get_dist_backend_class\n"
        f"b = get_dist_backend_class({name!r})(timeout=5)\n"
        "init = b.is_initialized\n"
        "try:\n"
        "    b.rank\n"
        "    err = ''\n"
        "except RuntimeError as exc:\n"
        "    err = str(exc)\n"
        "print(json.dumps([init, err, type(b).detect()]))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, env=env)
    init, err, detect = json.loads(out.stdout.strip().splitlines()[-1])
    assert init is False and detect is False
    assert name in err and ".init()" in err


def test_follows_the_call_contract() -> None:
    """The primitives take a Call (no DeprecationWarning from the core's adapter of the previous contract);
    a namespace names a new group: its own sequence key, and Horovod names no abandoned operation could have."""
    code = (
        "import warnings, json\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "import inspect, mmeval_horovod\n"
        "from mmeval_horovod import TorchHorovodDist, TFHorovodDist\n"
        "sigs = [list(inspect.signature(getattr(c, '_exchange_slots')).parameters) for c in (TorchHorovodDist,"
        " TFHorovodDist)]\n"
        "a, b = TorchHorovodDist(timeout=5), TorchHorovodDist(timeout=5, namespace='retry1')\n"
        "try:\n"
        "    TorchHorovodDist(namespace='a.b')\n"
        "    bad = ''\n"
        "except ValueError as exc:\n"
        "    bad = str(exc)\n"
        "print(json.dumps([sigs, a._sequence_key() != b._sequence_key(), a._slot_name(), b._slot_name(), bad]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    sigs, distinct, slot_a, slot_b, bad = json.loads(out.stdout.strip().splitlines()[-1])
    assert sigs == [["self", "call", "slot"]] * 2
    assert distinct and slot_a == "mmeval.torch_horovod.ps0.slots" and slot_b == "mmeval.torch_horovod.ps0.retry1.slots"
    assert "namespace='a.b'" in bad


def test_a_removed_process_sets_id_reused_starts_clean(tmp_path: Path) -> None:
    """A process set added after a poisoned one was removed gets its id from Horovod, not its fate."""
    rc, output, _ = horovodrun(3, HERE / "hvd_recycle_program.py", [str(tmp_path)], tmp_path)
    assert rc == 0, output[-6000:]
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)]
    for r, rep in enumerate(reports):
        assert "error" not in rep, f"rank {r}:\n{rep['error']}"
        assert rep["second_id"] == rep["first_id"], rep  # Horovod reused the id: the case under test
    assert reports[0]["timed_out"] and reports[0]["poisoned"], reports[0]
    for r in (0, 2):
        assert reports[r]["gathered"] == [0, 2], reports[r]
