"""A Horovod rank SIGKILLed inside a collective: the others raise, naming the operation, and nothing hangs.

Three ranks under ``horovodrun --gloo``; the last one kills itself in the
payload transfer of all_gather_object, gather_object (it is a sender) or
broadcast_object (it is the source) -- see ``hvd_kill_program.py``.

* Under a plain ``horovodrun``, the launcher sees a rank exit with 137 and
  terminates the others: the job ends with an error status within seconds of
  the kill. A survivor may be terminated before it reports; those that
  report raised a DistCommunicationError naming the operation.
* With a shell between horovodrun and each rank that reports success
  whatever the rank's status, horovodrun leaves the survivors alone and
  every one of them must raise on its own, within the timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "hvd_kill_program.py"
FLAVOUR = {"tf": "tensorflow", "tensorflow": "tensorflow", "torch": "torch", "pytorch": "torch"}.get(
    os.environ.get("MMEVAL_HOROVOD_FLAVOUR", "").strip().lower()
)
HOROVODRUN = shutil.which("horovodrun", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
NP, VICTIM, TIMEOUT, SLACK = 3, 2, 10.0, 8.0
#: hard limit of one launch (start-up of 3 framework processes on 2 cores, the fault, the reports)
LAUNCH_LIMIT = 300.0

pytestmark = pytest.mark.skipif(
    FLAVOUR is None or HOROVODRUN is None,
    reason="set MMEVAL_HOROVOD_FLAVOUR and build Horovod (tox -e horovod-torch / horovod-tf)",
)


def _launch(op: str, out: Path, hide_exit_status: bool) -> Dict[str, Any]:
    assert FLAVOUR is not None and HOROVODRUN is not None
    rank_cmd = [sys.executable, str(PROGRAM), FLAVOUR, str(out), op]
    if hide_exit_status:
        rank_cmd = ["sh", "-c", '"$@"; exit 0', "sh", *rank_cmd]
    cmd = [
        HOROVODRUN,
        "-np",
        str(NP),
        "--gloo",
        "-H",
        f"localhost:{NP}",
        "--network-interfaces",
        "lo",
        "--start-timeout",
        "120",
        *rank_cmd,
    ]
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    for var in ("MMEVAL_DIST_BACKEND", "MMEVAL_TIMEOUT"):
        env.pop(var, None)
    with open(out / "horovodrun.log", "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(HERE)
        )
        try:
            rc: Optional[int] = proc.wait(timeout=LAUNCH_LIMIT)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the job
            except ProcessLookupError:
                pass
            proc.wait(10)
    ended = time.monotonic()
    ranks: List[Dict[str, Any]] = []
    for r in range(NP):
        path = out / f"rank{r}.json"
        ranks.append(json.loads(path.read_text()) if path.exists() else {})
    log_text = (out / "horovodrun.log").read_text(errors="replace")
    assert rc is not None, f"horovodrun still ran after {LAUNCH_LIMIT:g}s\n{log_text[-4000:]}"
    assert "killed_at" in ranks[VICTIM], f"the victim never reached the payload transfer\n{log_text[-4000:]}"
    return {"rc": rc, "ranks": ranks, "ended": ended, "log": log_text}


def _check_survivor(r: int, info: Dict[str, Any], op: str, killed_at: float, log: str) -> None:
    assert info.get("raised_in") in (op, "barrier"), f"rank {r}: {info}\n{log[-3000:]}"
    assert "DistCommunicationError" in info["mro"], info
    assert info["raised_in"] in info["message"] and "horovod" in info["message"], info["message"]
    assert info["raised_at"] - killed_at < TIMEOUT + SLACK, f"rank {r} raised {info['raised_at'] - killed_at:.1f}s late"


def _launch_in_scratch(op: str, hide_exit_status: bool) -> Tuple[Dict[str, Any], float]:
    """:func:`_launch` in a scratch directory removed afterwards; the run and the victim's kill time."""
    out = Path(tempfile.mkdtemp(prefix="mmeval-hvd-kill-"))
    try:
        run = _launch(op, out, hide_exit_status=hide_exit_status)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return run, run["ranks"][VICTIM]["killed_at"]


@pytest.mark.parametrize("op", ["all_gather_object", "gather_object", "broadcast_object"])
def test_sigkill_every_survivor_raises(op: str) -> None:
    run, killed_at = _launch_in_scratch(op, hide_exit_status=True)
    for r in range(NP - 1):
        _check_survivor(r, run["ranks"][r], op, killed_at, run["log"])
    assert any(run["ranks"][r]["raised_in"] == op for r in range(NP - 1))


def test_sigkill_under_plain_horovodrun_ends_the_job() -> None:
    op = "all_gather_object"
    run, killed_at = _launch_in_scratch(op, hide_exit_status=False)
    assert run["rc"] != 0, "horovodrun must report the killed rank"
    assert run["ended"] - killed_at < TIMEOUT + 60, f"the job ended {run['ended'] - killed_at:.0f}s after the kill"
    for r in range(NP - 1):
        if run["ranks"][r]:  # the others may be terminated by horovodrun before they report
            _check_survivor(r, run["ranks"][r], op, killed_at, run["log"])
