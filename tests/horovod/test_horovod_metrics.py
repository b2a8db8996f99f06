"""Every metric's Horovod result equals the single-process one (issue 15 item 6), under ``horovodrun -np 2`` / ``3``.

The flavour (``torch_horovod`` in the horovod-torch env, ``tf_horovod`` in horovod-tf) and the
launcher come from test_horovod_backends.py. The cases, shardings and comparison are
tests/metric_cases.py's (shared with the torch_cpu and mpi4py tests): the single-process results
are computed here, pickled with the data, and the ranks of hvd_metrics_program.py compare their
results with them. One launch per world size runs every case; each case is then one test item,
asserted on every rank. Every launch has a hard timeout, after which it is killed with its ranks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from test_horovod_backends import BACKEND_NAMES, FLAVOUR, HOROVODRUN, LAUNCH_TIMEOUT, WORLD_SIZES, _kill_tree
from test_horovod_backends import pytestmark as _needs_horovod

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "hvd_metrics_program.py"
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

import metric_cases  # noqa: E402

pytestmark = _needs_horovod
_reports: Dict[int, List[Dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def payload_dir() -> Any:
    """A directory holding the pickled cases (data and single-process results), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="mmeval-horovod-metrics-"))
    metric_cases.write_payload(str(path / "payload.pkl"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _launch(np_: int, payload_dir: Path) -> List[Dict[str, Any]]:
    """Run hvd_metrics_program.py on ``np_`` ranks; every rank's JSON (fails with the log when one is missing)."""
    assert FLAVOUR is not None and HOROVODRUN is not None, (
        f"MMEVAL_HOROVOD_FLAVOUR={FLAVOUR} but no horovodrun next to {sys.executable} or on PATH: "
        f"build Horovod with tools/build_horovod.sh {FLAVOUR}"
    )
    out_dir = payload_dir / f"np{np_}"
    out_dir.mkdir()
    cmd = [HOROVODRUN, "-np", str(np_), "--gloo", "-H", f"localhost:{np_}", "--network-interfaces", "lo",
           "--start-timeout", "120", sys.executable, str(PROGRAM), FLAVOUR, str(payload_dir / "payload.pkl"),
           str(out_dir)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.pop("MMEVAL_DIST_BACKEND", None)
    env.pop("MMEVAL_TIMEOUT", None)
    log = out_dir / "horovodrun.log"
    start = time.monotonic()
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(HERE))
        try:
            rc = proc.wait(timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            rc = None
    describe = (f"horovodrun -np {np_} exited {rc} after {time.monotonic() - start:.1f}s"
                f"{' (killed at the hard timeout)' if rc is None else ''}; output:\n"
                f"{log.read_text(errors='replace')[-6000:]}")
    ranks = []
    for r in range(np_):
        path = out_dir / f"rank{r}.json"
        assert path.exists(), f"rank {r} wrote no results. {describe}"
        result = json.loads(path.read_text())
        assert "error" not in result, f"rank {r} failed:\n{result['error']}\n{describe}"
        assert result["backend"] == BACKEND_NAMES[FLAVOUR] and result["world_size"] == np_, result
        ranks.append(result["report"])
    assert rc == 0, describe
    return ranks


def reports(np_: int, payload_dir: Path) -> List[Dict[str, Any]]:
    """Every rank's report of the one launch at ``np_`` (launched on first use)."""
    if np_ not in _reports:
        _reports[np_] = _launch(np_, payload_dir)
    return _reports[np_]


@pytest.mark.parametrize("case", metric_cases.CASE_NAMES)
@pytest.mark.parametrize("np_", WORLD_SIZES, ids=lambda n: f"np{n}")
def test_distributed_equals_single_process(np_: int, case: str, payload_dir: Path) -> None:
    problems = metric_cases.case_failures(reports(np_, payload_dir), case)
    assert not problems, f"{BACKEND_NAMES[FLAVOUR or 'torch']}, {np_} ranks:\n" + "\n".join(problems)
