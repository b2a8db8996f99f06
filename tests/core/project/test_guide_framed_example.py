"""The guide's FramedDistBackend example (docs/writing-a-backend.md) passes the whole conformance suite.

A third party implementing one primitive (``_all_gather_bytes``) in at most 45 lines inherits every
guarantee: the terminal checks (poisoning, two threads at once, Ctrl-C) run on it in real processes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "writing-a-backend.md"

PROGRAM = """
import json, os, sys
sys.path.insert(0, os.environ["EXAMPLE_DIR"])
from folder_framed import FolderFramedDist
from mmeval.testing.conformance import check_backend

base = os.environ["FOLDER_DIR"]
backend = FolderFramedDist(timeout=60)
made = [0]

def fresh(timeout):
    made[0] += 1                      # every rank calls fresh at the same point: the same new folder
    folder = os.path.join(base, f"group{made[0]}")
    os.makedirs(folder, exist_ok=True)
    return FolderFramedDist(folder, timeout=timeout)

print(json.dumps(check_backend(backend, fresh=fresh)))
"""


def _example(tmp_path: Path) -> Path:
    text = GUIDE.read_text()
    match = re.search(r"<!-- framed-example -->\n```python\n(.*?)```", text, re.S)
    assert match, "the guide lost its framed example"
    code = match.group(1)
    assert len(code.splitlines()) <= 45, "the smallest complete backend must stay within 45 lines"
    primitives = set(re.findall(r"def (_(?:all_gather|gather|broadcast|exchange|all_reduce|reduce)\w*)\(", code))
    assert primitives == {"_all_gather_bytes"}, primitives
    assert "import PeerLost" not in code or "from mmeval.core.dist_backends import" in code
    (tmp_path / "folder_framed.py").write_text(code)
    return tmp_path


@pytest.mark.parametrize("ws", [1, 2, 3])
def test_the_guides_framed_backend_passes_every_check(tmp_path: Path, ws: int) -> None:
    example = _example(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    procs = []
    for rank in range(ws):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
        env.update(EXAMPLE_DIR=str(example), FOLDER_DIR=str(shared), FOLDER_RANK=str(rank), FOLDER_WORLD_SIZE=str(ws))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            p.kill()
    failed = [f"rank {r}: {err[-1500:]}" for r, (rc, _, err) in enumerate(results) if rc != 0]
    assert not failed, "\n".join(failed)
    for _, _, err in results:  # the kit shards on purpose: it never prints its own ShardingWarning
        assert "ShardingWarning" not in err, err[-1500:]
    outs = [json.loads(out.strip().splitlines()[-1]) for _, out, _ in results]
    for done in outs:
        assert "accuracy_end_to_end" in done
        if ws > 1:
            for check in (
                "unpicklable_on_one_rank",
                "question_mismatch",
                "poisoning",
                "concurrent_calls",
                "interrupt",
                "reduction_dtypes",
                "reduction_nan",
            ):
                assert check in done, done
