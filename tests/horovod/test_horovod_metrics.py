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
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import pytest
from test_horovod_backends import BACKEND_NAMES, FLAVOUR, WORLD_SIZES, horovodrun
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
    out_dir = payload_dir / f"np{np_}"
    out_dir.mkdir()
    rc, output, seconds = horovodrun(
        np_, PROGRAM, [str(payload_dir / "payload.pkl"), str(out_dir)], out_dir, env={"OMP_NUM_THREADS": "1"}
    )
    describe = f"horovodrun -np {np_} exited {rc} after {seconds:.1f}s; output:\n{output[-6000:]}"
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
