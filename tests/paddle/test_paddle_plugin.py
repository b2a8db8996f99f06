"""mmeval-paddle as a plugin, in fresh interpreters: cheap to import, registered, and clear when misused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict

import pytest


def _python(code: str, **env: str) -> Dict[str, Any]:
    """Run ``code`` in a fresh interpreter (no launcher); it prints one JSON line, returned here."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONWARNINGS": "ignore", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_import_and_listing_do_not_import_paddle() -> None:
    got = _python(
        "import json, sys\n"
        "from mmeval.core.dist import list_all_backends, get_dist_backend_class, resolve_backend_name\n"
        "names = list_all_backends()\n"
        "cls = get_dist_backend_class('paddle_dist')\n"
        "import mmeval_paddle\n"
        "print(json.dumps({'names': names, 'cls': cls.__module__ + ':' + cls.__qualname__,\n"
        "                  'detect': cls.detect(), 'auto': resolve_backend_name(None), 'priority': cls.priority,\n"
        "                  'paddle': [m for m in sys.modules if m == 'paddle' or m.startswith('paddle.')]}))\n",
        MMEVAL_DIST_BACKEND="",
    )
    assert "paddle_dist" in got["names"]
    assert got["cls"] == "mmeval_paddle.backend:PaddleDist"
    assert got["detect"] is False and got["auto"] == "non_dist"
    assert got["priority"] == 10
    assert got["paddle"] == []


def test_single_process_without_launcher_is_rank_0_of_1() -> None:
    got = _python(
        "import json\n"
        "import paddle.distributed as dist\n"
        "from mmeval_paddle import PaddleDist\n"
        "b = PaddleDist(timeout=5)\n"
        "obj = {'a': [1, 2]}\n"
        "out = b.all_gather_object(obj)\n"
        "print(json.dumps({'rank': b.rank, 'ws': b.world_size, 'init': b.is_initialized, 'detect': PaddleDist.detect(),\n"
        "                  'gathered': out, 'copy': out[0] is not obj, 'bcast': b.broadcast_object(3, src=0),\n"
        "                  'gather': b.gather_object('x', dst=0)}))\n",
    )
    assert got == {
        "rank": 0,
        "ws": 1,
        "init": False,
        "detect": False,
        "gathered": [{"a": [1, 2]}],
        "copy": True,
        "bcast": 3,
        "gather": ["x"],
    }


def test_uninitialized_multi_process_world_says_what_to_call() -> None:
    got = _python(
        "import json\n"
        "import paddle.distributed as dist\n"
        "from mmeval_paddle import PaddleDist\n"
        "try:\n"
        "    PaddleDist().rank\n"
        "except RuntimeError as exc:\n"
        "    print(json.dumps({'error': str(exc)}))\n",
        PADDLE_TRAINERS_NUM="2",
        PADDLE_TRAINER_ID="1",
    )
    assert "paddle_dist" in got["error"] and "init_parallel_env()" in got["error"]


@pytest.mark.parametrize("value", ["0", "-3"])
def test_bad_timeout_is_refused(value: str) -> None:
    from mmeval_paddle import PaddleDist

    with pytest.raises(ValueError, match="paddle_dist"):
        PaddleDist(timeout=float(value))


def test_mmeval_021_import_paths_resolve_to_the_plugin() -> None:
    got = _python(
        "import json, sys\n"
        "from mmeval.core.dist_backends.paddle_dist import PaddleDist as a\n"
        "from mmeval.core.dist_backends import PaddleDist as b\n"
        "import mmeval_paddle\n"
        "print(json.dumps({'same': a is mmeval_paddle.PaddleDist and b is mmeval_paddle.PaddleDist,\n"
        "                  'paddle': 'paddle' in sys.modules}))\n",
    )
    assert got == {"same": True, "paddle": False}


def test_primitives_take_the_call_contract() -> None:
    """No primitive of the previous (fill, timeout) contract: no DeprecationWarning, no compatibility adapter."""
    import inspect

    from mmeval_paddle import PaddleDist

    for name in ("_exchange_slots", "_all_gather_bytes", "_gather_bytes", "_broadcast_bytes"):
        params = list(inspect.signature(getattr(PaddleDist, name)).parameters)
        assert params[:2] == ["self", "call"], (name, params)
    assert PaddleDist.max_timeout == 1e9
    with pytest.raises(ValueError, match=r"paddle_dist.*without a limit"):
        PaddleDist(timeout=float("inf"))
