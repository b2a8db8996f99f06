"""MPI4PyDist without MPI: packaging, settings, a world of one, waiting and broken communicators.

Nothing here imports ``mpi4py.MPI``; a fake communicator stands in where one is
needed. The real transport is tested under mpiexec (test_mpi_runs.py).
"""

from __future__ import annotations

import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

mmeval_mpi4py = pytest.importorskip("mmeval_mpi4py")
from mmeval.core.dist_backends import FramedDistBackend  # noqa: E402
from mmeval.core.dist_backends.framed_backend import DEFAULT_TIMEOUT  # noqa: E402
from mmeval_mpi4py import MPI4PyDist  # noqa: E402
from mmeval_mpi4py import backend as backend_module  # noqa: E402

LAUNCHER_VARS = ("PMI", "OMPI_", "HYD", "MPI_LOCAL", "MV2_", "MPIRUN_", "SLURM_", "MMEVAL_")


@pytest.fixture(autouse=True)
def no_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test as a plain single process with no mmeval settings."""
    import os

    for key in list(os.environ):
        if key.startswith(LAUNCHER_VARS):
            monkeypatch.delenv(key)


class FakeComm:
    """Just enough of an mpi4py communicator for rank, size and the sequence key."""

    def __init__(self, rank: int, size: int, handle: int) -> None:
        self._rank, self._size, self._handle = rank, size, handle

    def Get_rank(self) -> int:
        return self._rank

    def Get_size(self) -> int:
        return self._size

    def py2f(self) -> int:
        return self._handle

    # attributes live in MPI, per handle: two Python objects over one handle see the same ones
    _attributes: Dict[int, Dict[int, Any]] = {}

    @classmethod
    def Create_keyval(cls) -> int:
        return 7

    def Get_attr(self, keyval: int) -> Any:
        return self._attributes.get(self._handle, {}).get(keyval)

    def Set_attr(self, keyval: int, value: Any) -> None:
        self._attributes.setdefault(self._handle, {})[keyval] = value


class FakeRequest:
    def __init__(self, done_after: int) -> None:
        self.tests = 0
        self.done_after = done_after
        self.times: List[float] = []  # time.monotonic() of each Test()

    def Test(self) -> bool:
        self.tests += 1
        self.times.append(time.monotonic())
        return self.tests > self.done_after


# -- packaging ----------------------------------------------------------------


def test_distribution_metadata() -> None:
    dist = metadata.distribution("mmeval-mpi4py")
    assert dist.version == "0.1.0"
    requires = [r.replace(" ", "") for r in dist.requires or []]
    assert any(r.startswith("mmeval-core") and ">=0.3" in r and "<0.4" in r for r in requires), requires
    assert any(r.startswith("mpi4py>=3.1") for r in requires), requires
    assert any(r.startswith("mpich") and 'extra=="mpich"' in r for r in requires), requires
    eps = [ep for ep in dist.entry_points if ep.group == "mmeval.dist_backends"]
    assert [(ep.name, ep.value) for ep in eps] == [("mpi4py", "mmeval_mpi4py.backend:MPI4PyDist")]


def test_typed_package() -> None:
    assert (Path(mmeval_mpi4py.__file__).parent / "py.typed").is_file()


def test_class_contract() -> None:
    assert issubclass(MPI4PyDist, FramedDistBackend)
    assert MPI4PyDist.name == "mpi4py"
    from mmeval.core.dist import get_dist_backend_class

    assert get_dist_backend_class("mpi4py") is MPI4PyDist


# -- settings -------------------------------------------------------------------


def test_timeout_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MPI4PyDist().timeout == DEFAULT_TIMEOUT
    monkeypatch.setenv("MMEVAL_TIMEOUT", "30")
    assert MPI4PyDist().timeout == 30.0
    monkeypatch.setenv("MMEVAL_MPI4PY_TIMEOUT", "12.5")
    assert MPI4PyDist().timeout == 12.5
    assert MPI4PyDist(timeout=3).timeout == 3.0
    with pytest.raises(ValueError, match="timeout=0: a timeout must be at least"):
        MPI4PyDist(timeout=0)
    monkeypatch.setenv("MMEVAL_MPI4PY_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="MMEVAL_MPI4PY_TIMEOUT"):
        MPI4PyDist()


def test_large_count_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MPI4PyDist().large_count == "auto"
    monkeypatch.setenv("MMEVAL_MPI4PY_LARGE_COUNT", "datatype")
    b = MPI4PyDist()
    assert b.large_count == "datatype" and b._uses_big_count() is False
    monkeypatch.setenv("MMEVAL_MPI4PY_LARGE_COUNT", "huge")
    with pytest.raises(ValueError, match="auto"):
        MPI4PyDist()


def test_buffer_cache_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MPI4PyDist().buffer_cache_bytes == 256 * 2**20
    monkeypatch.setenv("MMEVAL_MPI4PY_BUFFER_CACHE_MB", "0")
    assert MPI4PyDist().buffer_cache_bytes == 0
    monkeypatch.setenv("MMEVAL_MPI4PY_BUFFER_CACHE_MB", "lots")
    with pytest.raises(ValueError, match="BUFFER_CACHE_MB"):
        MPI4PyDist()


def test_abort_at_exit_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MPI4PyDist().abort_at_exit is True
    monkeypatch.setenv("MMEVAL_MPI4PY_ABORT_AT_EXIT", "0")
    assert MPI4PyDist().abort_at_exit is False


# -- a world of one -------------------------------------------------------------


def test_world_of_one_without_mpi() -> None:
    if "mpi4py.MPI" in sys.modules:  # pragma: no cover
        pytest.skip("mpi4py.MPI was imported in this process")
    b = MPI4PyDist()
    assert not MPI4PyDist.detect()
    assert not b.is_initialized
    assert (b.rank, b.world_size) == (0, 1)
    arr = np.arange(5)
    obj = {"a": arr}
    got = b.all_gather_object(obj)
    assert len(got) == 1 and got[0] is not obj and np.array_equal(got[0]["a"], arr)
    assert b.broadcast_object(obj) is obj
    assert b.gather_object(obj)[0]["a"].tolist() == [0, 1, 2, 3, 4]
    assert b.barrier() is None
    with pytest.raises(ValueError, match=r"mpi4py\.broadcast_object: src=1"):
        b.broadcast_object(obj, src=1)
    assert "not initialized" in repr(b)
    assert "mpi4py.MPI" not in sys.modules


def test_rank_and_size_are_the_communicators() -> None:
    a = MPI4PyDist(FakeComm(2, 5, handle=901))
    assert (a.rank, a.world_size) == (2, 5)
    b = MPI4PyDist(FakeComm(2, 5, handle=901))
    c = MPI4PyDist(FakeComm(0, 3, handle=902))
    assert a._sequence_key() == b._sequence_key() != c._sequence_key()
    from mmeval.core.dist_backends.framed_backend import _state

    # one count (and lock, and fate) per communicator
    assert _state(a._sequence_key()) is _state(b._sequence_key()) is not _state(c._sequence_key())


# -- waiting ------------------------------------------------------------------


def _call(timeout: float) -> Any:
    from mmeval.core.dist_backends.transport import Call

    return Call("mpi4py", "all_gather_object", 1, 0, 2, -1, timeout)


def test_wait_returns_when_the_request_completes() -> None:
    b = MPI4PyDist(FakeComm(0, 2, handle=903))
    req = FakeRequest(done_after=50)
    b._wait(_call(10), req, (), "a test")
    assert req.tests == 51


def test_wait_times_out_and_the_core_keeps_the_buffers() -> None:
    from mmeval.core.dist_backends import transport

    b = MPI4PyDist(FakeComm(0, 2, handle=904))
    b.leave_notice = False  # no probing for leave notices on a fake communicator (tests/mpi/test_leave_notice.py)
    req = FakeRequest(done_after=10**9)
    buf = np.empty(10, np.uint8)
    call = _call(0.3)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="a test"):
        b._wait(call, req, (buf,), "a test")
    elapsed = time.monotonic() - start
    assert 0.3 <= elapsed < 1.5
    # After the spin phase (b.spin_seconds) the wait sleeps between tests, the sleeps doubling from
    # b.min_sleep up to b.max_sleep: from 50 ms on, every two tests are b.max_sleep apart or more. A sleep is
    # never shorter than asked, so this holds on any CPU; the count of tests in the spin phase follows the
    # CPU's speed, and is not checked.
    late = [t - start for t in req.times if t - start >= 0.05]
    assert len(late) >= 2, "the wait kept testing the request until its deadline"
    gaps = np.diff(late)
    assert gaps.min() >= 0.95 * b.max_sleep, f"tests {gaps.min() * 1e6:.0f} us apart after the spin phase"
    assert len(late) <= (0.3 - 0.05) / b.max_sleep + 2
    call.abandon()  # what the core does when a step fails: the request and its buffers live on
    assert any(isinstance(k, tuple) and req in k and any(x is buf for x in k) for k in transport._kept)


def test_a_failed_step_is_reraised_for_the_core_to_poison() -> None:
    b = MPI4PyDist(FakeComm(0, 2, handle=905))
    b.abort_at_exit = False  # (True would make this test process MPI_Abort at exit)
    b.leave_notice = False  # (no notice sent on a fake communicator)
    call = _call(5.0)

    def boom() -> None:
        raise TimeoutError("late peer")

    with pytest.raises(TimeoutError, match="late peer"):
        b._guarded(call, boom)
    assert b._guarded(call, lambda: 7) == 7


def test_null_and_inter_communicators_are_refused() -> None:
    class Null(FakeComm):
        def __bool__(self) -> bool:
            return False

    class Inter(FakeComm):
        def Is_inter(self) -> bool:
            return True

    with pytest.raises(ValueError, match="COMM_NULL"):
        MPI4PyDist(Null(0, 1, handle=907))
    with pytest.raises(TypeError, match="intracommunicator"):
        MPI4PyDist(Inter(0, 2, handle=908))


def test_split_transfers_send_the_rest_from_the_callers_array_only_when_one_segment_holds_it() -> None:
    from mmeval.core.serialization import encode

    head = backend_module.SPLIT_HEAD
    data = np.arange(4 << 20, dtype=np.uint8)
    frame = encode({"data": data, "rank": 1})
    rest = backend_module._segment_bytes(frame, head, frame.nbytes)
    assert rest is not None and np.shares_memory(rest, data) and not rest.flags.writeable
    assert bytes(rest) == frame.tobytes()[head:]
    two = encode([np.zeros(3 << 20, np.uint8), np.ones(2 << 20, np.uint8)])
    assert backend_module._segment_bytes(two, head, two.nbytes) is None  # spans two arrays: staged
