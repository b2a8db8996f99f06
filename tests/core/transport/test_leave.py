"""core/dist_backends/leave.py in real processes: a registered leave callback runs once, with the reason, at the
first of an uncaught exception, the interpreter's exit and SIGTERM (the process still ends by that signal)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import os, signal, sys
    from mmeval.core.dist_backends import on_leave
    from mmeval.core.dist_backends.leave import LEAVE, leaving

    def told(why, linger):
        print(f"told: {why} linger={linger}", flush=True)

    on_leave(told)
    on_leave(told)  # idempotent per callback
    how = sys.argv[1]
    if how == "exception":
        raise KeyError("boom")
    if how == "exit":
        sys.exit(3)
    if how == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    if how == "twice":
        leaving("first")
        leaving("second")
        assert LEAVE is sys.modules["mmeval.core.dist_backends.leave"].LEAVE
""")


def _run(how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM, how], capture_output=True, text=True, timeout=120)


def test_an_uncaught_exception_tells_once_after_the_traceback() -> None:
    proc = _run("exception")
    assert proc.returncode == 1 and "KeyError: 'boom'" in proc.stderr
    assert proc.stdout.splitlines() == ["told: an uncaught KeyError: 'boom' linger=True"]


def test_the_exit_tells_once() -> None:
    proc = _run("exit")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines() == ["told: the process exited (the end of the script, or sys.exit) linger=True"]


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX signals")
def test_sigterm_tells_without_lingering_and_still_ends_by_the_signal() -> None:
    proc = _run("signal")
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, proc.stderr)
    assert proc.stdout.splitlines() == ["told: signal SIGTERM linger=False"]


def test_later_reasons_are_not_told() -> None:
    proc = _run("twice")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["told: first linger=True"]
