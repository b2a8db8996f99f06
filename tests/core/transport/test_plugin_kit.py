"""The helpers every backend plugin shares (mmeval.core.dist_backends.plugin_kit), and the plugins' one import."""

from __future__ import annotations

import ast
import gc
import pathlib
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from mmeval.core.dist_backends import ALIGN, Call, Frame
from mmeval.core.dist_backends.plugin_kit import (
    GroupToken,
    GroupTokens,
    blocks_at,
    choice,
    flag,
    keep_until_exit,
    mebibytes,
    not_a_member,
    packed_offsets,
    padded_block_size,
    read_setting,
    run_on_thread,
    seconds_left,
    sent_frame,
    slot_frame,
    split_blocks,
    write_block,
)
from mmeval.core.errors import CollectiveTimeoutError

ROOT = pathlib.Path(__file__).resolve().parents[3]
GiB = 1 << 30


def _call(timeout: float = 5.0, frame: Frame | None = None) -> Call:
    return Call("kit", "all_gather_object", 0, 0, 1, -1, timeout, frame)


def test_padded_block_size() -> None:
    assert ALIGN == 64
    assert padded_block_size([]) == padded_block_size([0, 0]) == 0
    assert padded_block_size([1, 0]) == padded_block_size([64, 3]) == 64
    assert padded_block_size([65, 3]) == 128
    assert padded_block_size([2 * GiB + 1, 5]) == 2 * GiB + 64  # Python ints: no overflow
    assert padded_block_size([np.int64(3 * GiB)]) == 3 * GiB
    with pytest.raises(ValueError, match="negative"):
        padded_block_size([5, -1])


def test_packed_offsets_align_every_start() -> None:
    assert packed_offsets([]) == ([], 0)
    assert packed_offsets([1, 0, 65, 64]) == ([0, 64, 64, 192], 256)
    assert packed_offsets([3, 5, 2], alignment=1) == ([0, 3, 8], 10)
    with pytest.raises(ValueError):
        packed_offsets([-2])


def test_split_blocks_and_blocks_at_are_views() -> None:
    buf = bytearray(range(192))
    views = split_blocks(memoryview(buf), 64, [3, 0, 64])
    assert [bytes(v) for v in views] == [bytes(range(3)), b"", bytes(range(128, 192))]
    buf[0] = 99
    assert views[0][0] == 99  # no copy
    with pytest.raises(ValueError, match="more than the 64-byte block"):
        split_blocks(memoryview(buf), 64, [65, 0, 0])
    with pytest.raises(ValueError, match="smaller than"):
        split_blocks(memoryview(buf), 64, [1, 1, 1, 1])
    assert [bytes(v) for v in blocks_at(memoryview(buf), [10, 20], [2, 1])] == [bytes([10, 11]), bytes([20])]
    with pytest.raises(ValueError, match="outside"):
        blocks_at(memoryview(buf), [190], [3])


def test_write_block_zeroes_the_rest() -> None:
    out = bytearray(b"\xff" * 130)
    frame = slot_frame(memoryview(b"abc"))
    write_block(memoryview(out), frame)
    assert bytes(out) == b"abc" + bytes(127)
    out[:] = b"\xff" * 130
    write_block(memoryview(out), None)
    assert bytes(out) == bytes(130)
    with pytest.raises(ValueError, match="does not fit"):
        write_block(memoryview(bytearray(2)), frame)


def test_slot_frame_is_a_frame_over_the_slot() -> None:
    slot = memoryview(bytearray(b"0123456789"))
    frame = slot_frame(slot)
    assert frame.nbytes == 10 and frame.tobytes() == b"0123456789"
    assert bytes(frame.segment_view(2, 5) or b"") == b"234"
    part = bytearray(4)
    frame.write_range(memoryview(part), 8)
    assert bytes(part) == b"89\0\0"


def test_sent_frame() -> None:
    frame = slot_frame(memoryview(b"x"))
    assert sent_frame(_call(frame=frame)) is frame
    with pytest.raises(RuntimeError, match="no frame"):
        sent_frame(_call())


def test_run_on_thread_returns_raises_and_times_out() -> None:
    assert run_on_thread(_call(), lambda: 7, "seven") == 7
    with pytest.raises(ZeroDivisionError):
        run_on_thread(_call(), lambda: 1 // 0, "dividing")
    with pytest.raises(TimeoutError, match="the wait did not complete"):
        run_on_thread(_call(), lambda: False, "the wait")

    class Task:
        def wait(self) -> None:
            raise ConnectionError("peer gone")

    with pytest.raises(ConnectionError):
        run_on_thread(_call(), Task, "a task")
    release = threading.Event()
    start = time.monotonic()
    with pytest.raises(CollectiveTimeoutError, match="blocked call"):
        run_on_thread(_call(timeout=0.3), release.wait, "blocked call")
    assert time.monotonic() - start < 3
    release.set()


def test_seconds_left() -> None:
    call = _call(timeout=10)
    assert 9 < seconds_left(call) <= 10
    assert seconds_left(call, cap=2) == 2
    assert seconds_left(_call(timeout=0.001)) >= 0.001


def test_keep_until_exit_pins_the_object() -> None:
    class Group:
        pass

    g = Group()
    before = sys.getrefcount(g)
    keep_until_exit(g)
    keep_until_exit(g)  # idempotent
    assert sys.getrefcount(g) > before


def test_group_tokens_follow_the_object() -> None:
    class Group:
        pass

    tokens = GroupTokens()
    a, b = Group(), Group()
    ta = tokens.token(a, label="A")
    assert isinstance(ta, GroupToken) and ta.label == "A" and "A" in repr(ta)
    assert tokens.token(a) is ta
    assert tokens.token(a, "ns") is not ta and tokens.token(a, "ns") is tokens.token(a, "ns")
    assert tokens.token(b) is not ta
    ta.state["x"] = 1
    assert tokens.token(a).state == {"x": 1}
    import weakref

    ref = weakref.ref(ta)
    del a, ta
    gc.collect()
    assert ref() is None  # gone with its group: a new object (even at a reused id) starts clean
    with pytest.raises(TypeError):
        tokens.token((0, 1))

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other: object) -> bool:
            return True

    u, v = Unhashable(), Unhashable()
    assert tokens.token(u) is tokens.token(u) is not tokens.token(v)  # identity, not equality


def test_not_a_member() -> None:
    exc = not_a_member("torch_cpu", "global rank 3", "the process group")
    assert isinstance(exc, RuntimeError)
    assert "torch_cpu" in str(exc) and "global rank 3" in str(exc) and "not a member of the process group" in str(exc)


def test_read_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MMEVAL_KIT_MODE", "MMEVAL_MODE"):
        monkeypatch.delenv(var, raising=False)
    assert read_setting("kit", "MODE", choice("a", "b"), "a", "a or b") == "a"
    monkeypatch.setenv("MMEVAL_MODE", "B")
    assert read_setting("kit", "MODE", choice("a", "b"), "a", "a or b") == "b"
    monkeypatch.setenv("MMEVAL_KIT_MODE", "c")
    with pytest.raises(ValueError, match=r"kit: MMEVAL_KIT_MODE='c' is not a or b"):
        read_setting("kit", "MODE", choice("a", "b"), "a", "a or b")
    assert [flag(t) for t in ("1", "on", "TRUE", "0", "off", "No")] == [True, True, True, False, False, False]
    with pytest.raises(ValueError):
        flag("maybe")
    assert mebibytes("1.5") == 3 << 19 and mebibytes("0") == 0
    for bad in ("-1", "nan", "lots"):
        with pytest.raises(ValueError):
            mebibytes(bad)


def _python(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
    )


def test_start_up_watchdog_ends_a_start_up_that_never_returns() -> None:
    start = time.monotonic()
    proc = _python("""
        import time
        from mmeval.core.dist_backends.plugin_kit import start_up_watchdog
        with start_up_watchdog(0.5, "mmeval: rank 0: the start-up never finished"):
            time.sleep(60)
        print("not reached")
    """)
    assert proc.returncode != 0 and "not reached" not in proc.stdout
    assert "rank 0: the start-up never finished" in proc.stderr
    assert time.monotonic() - start < 30


def test_start_up_watchdog_leaves_a_finished_start_up_alone() -> None:
    proc = _python("""
        import time
        from mmeval.core.dist_backends.plugin_kit import start_up_watchdog
        with start_up_watchdog(1.0, "killed"):
            pass
        time.sleep(2.0)
        print("alive")
    """)
    assert proc.returncode == 0 and "alive" in proc.stdout and "killed" not in proc.stderr


#: The modules a plugin may import mmeval names from (issue 19: the one plugin API).
PLUGIN_IMPORTS = ("mmeval.core.dist_backends", "mmeval.core.dist_backends.plugin_kit", "mmeval.core.errors")


def test_plugins_import_only_the_plugin_api() -> None:
    offenders = []
    for path in sorted((ROOT / "plugins").glob("*/src/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if (name == "mmeval" or name.startswith("mmeval.")) and name not in PLUGIN_IMPORTS:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not offenders, "plugins import mmeval outside " + " and ".join(PLUGIN_IMPORTS) + ":\n" + "\n".join(offenders)
