"""mmeval.testing.ranks: real spawned ranks, one outcome each, bounded, nothing left running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mmeval.testing import ranks
from mmeval.testing.ranks import RankOutcome, RanksFailed, free_port, raise_for_failures, run_ranks, values


class Unpicklable:
    def __reduce__(self) -> tuple:
        raise TypeError("this object refuses to be pickled")


def _echo(rank: int, world_size: int, *args: object) -> tuple:
    return rank, world_size, args, os.environ.get("MMEVAL_RANKS_TEST", ""), os.environ.get("MMEVAL_RANKS_GONE")


def _rank1_raises(rank: int, world_size: int) -> int:
    if rank == 1:
        raise KeyError("rank one's bad key")
    return rank


def _rank1_exits(rank: int, world_size: int) -> int:
    if rank == 1:
        os._exit(3)
    return rank


def _rank0_sleeps(rank: int, world_size: int, pid_dir: str) -> int:
    Path(pid_dir, f"rank{rank}.pid").write_text(str(os.getpid()))
    if rank == 0:
        time.sleep(600)
    return rank


def _returns_unpicklable(rank: int, world_size: int) -> object:
    return Unpicklable()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too: it only waits for its parent to reap it
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def test_free_port_can_be_bound() -> None:
    port = free_port()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_each_rank_returns_in_rank_order_with_its_args_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMEVAL_RANKS_GONE", "inherited")  # the ranks inherit it; env=None removes it there
    out = run_ranks(_echo, 3, "a", 1, env={"MMEVAL_RANKS_TEST": "set", "MMEVAL_RANKS_GONE": None}, timeout=120)
    assert [o.status for o in out] == ["ok"] * 3
    assert values(out) == [(r, 3, ("a", 1), "set", None) for r in range(3)]
    assert all(o.exitcode == 0 and o.elapsed > 0 for o in out)
    per_rank = run_ranks(_echo, 2, per_rank_args=[("x",), ("y", "z")], timeout=120)
    assert [o.value[2] for o in per_rank] == [("x",), ("y", "z")]


def test_an_exception_is_reported_with_type_message_and_traceback() -> None:
    out = run_ranks(_rank1_raises, 3, timeout=120)
    assert [o.status for o in out] == ["ok", "raised", "ok"]
    bad = out[1]
    assert bad.error_type == "builtins.KeyError"
    assert "rank one's bad key" in bad.message
    assert "_rank1_raises" in bad.traceback
    with pytest.raises(RanksFailed, match=r"1 of 3 ranks failed:\nrank 1: raised .*KeyError") as info:
        values(out)
    assert info.value.outcomes == out


@pytest.mark.parametrize(
    "start_method",
    [
        "spawn",
        pytest.param(
            "fork", marks=pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux only here")
        ),
    ],
)
def test_a_rank_that_exits_without_reporting_died_with_its_exit_code(start_method: str) -> None:
    # under fork a later rank inherits the earlier ranks' pipe ends: the death is seen from the process, not EOF
    out = run_ranks(_rank1_exits, 3, timeout=120, start_method=start_method)
    assert out[0].ok and out[0].value == 0 and out[2].value == 2
    assert (out[1].status, out[1].exitcode) == ("died", 3)
    assert "rank 1: died" in str(out[1])


def test_a_value_that_cannot_be_sent_is_reported_as_raised() -> None:
    out = run_ranks(_returns_unpicklable, 1, timeout=120)
    assert out[0].status == "raised"
    assert "refuses to be pickled" in out[0].message


def test_the_bound_kills_a_late_rank_reports_it_and_leaves_no_process(tmp_path: Path) -> None:
    timeout = 20.0
    start = time.monotonic()
    out = run_ranks(_rank0_sleeps, 2, str(tmp_path), timeout=timeout)
    took = time.monotonic() - start
    assert [o.status for o in out] == ["timed out", "ok"]
    assert out[0].exitcode == -signal.SIGKILL
    # bounded by its own timeout (plus the kill and reap), whatever the machine's load
    assert timeout <= took < timeout + 15
    for r in range(2):
        pid = int((tmp_path / f"rank{r}.pid").read_text())
        assert not _alive(pid), f"rank {r} (pid {pid}) outlived run_ranks"
    with pytest.raises(RanksFailed, match="rank 0: timed out"):
        raise_for_failures(out)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux only")
def test_ranks_die_with_the_process_that_started_them(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from mmeval.testing.ranks import run_ranks
        from test_testing_ranks import _rank0_sleeps
        run_ranks(_rank0_sleeps, 2, {str(tmp_path)!r}, timeout=600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        pid_file = tmp_path / "rank0.pid"
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "rank 0 never started"
            assert parent.poll() is None, "the parent exited early"
            time.sleep(0.1)
        pid = int(pid_file.read_text())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while _alive(pid):
            assert time.monotonic() < deadline, f"rank 0 (pid {pid}) outlived its killed parent"
            time.sleep(0.1)
    finally:
        parent.kill()
        parent.wait()


def test_bad_arguments_are_refused_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="world_size must be >= 1"):
        run_ranks(_echo, 0)
    with pytest.raises(ValueError, match="per_rank_args has 1 entries for 2 ranks"):
        run_ranks(_echo, 2, per_rank_args=[()])


def test_outcome_text_names_the_rank_and_status() -> None:
    assert str(RankOutcome(2, "timed out", exitcode=-9, elapsed=1.0)) == "rank 2: timed out after 1.0s (exit code -9)"
    assert ranks.STATUSES == ("ok", "raised", "died", "timed out")
