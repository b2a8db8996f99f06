"""What every backend plugin needs besides its own transport decisions, written once.

Block layout (64-byte aligned, padded or packed), writing a frame into a send
buffer and zeroing the rest, waiting for a blocking transport call on a
helper thread, keeping a failed group alive until exit, one token per live
group object, membership errors, backend settings, a watchdog for a runtime's
start-up that cannot be interrupted, the ``mmeval`` logger, and a large gather
to one rank in rounds (:mod:`~mmeval.core.dist_backends.gather_rounds`). Not part of the
plugin API's short surface (:mod:`mmeval.core.dist_backends`): a plugin that
wants these imports them explicitly from here; see docs/writing-a-backend.md.
No framework is imported.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import weakref
from typing import Any, Callable, Dict, Hashable, Iterator, List, Optional, Sequence, Set, Tuple, TypeVar

from ..settings import choice, flag, mebibytes, read_setting
from ..settings import logger as _mmeval_logger
from ..wire import ALIGN, Frame
from ..wire.release import releasable
from .gather_rounds import RoundGather, aligned_empty, gather_in_rounds, round_bytes_setting
from .transport import Call, keep_forever

__all__ = [
    "logger",
    "align_up",
    "padded_block_size",
    "packed_offsets",
    "split_blocks",
    "blocks_at",
    "write_block",
    "slot_frame",
    "sent_frame",
    "seconds_left",
    "run_on_thread",
    "keep_until_exit",
    "GroupToken",
    "GroupTokens",
    "not_a_member",
    "read_setting",
    "choice",
    "flag",
    "mebibytes",
    "start_up_watchdog",
    "releasable",
    "aligned_empty",
    "gather_in_rounds",
    "round_bytes_setting",
    "RoundGather",
]

_T = TypeVar("_T")

#: The ``mmeval`` logger (:func:`mmeval.core.settings.logger`).
logger = _mmeval_logger()


# -- block layout ------------------------------------------------------------------------------


def align_up(n: int, alignment: int = ALIGN) -> int:
    """``n`` rounded up to a multiple of ``alignment`` (> 0); Python ints, so no 2 / 4 GiB overflow."""
    return -(-int(n) // alignment) * alignment


def padded_block_size(sizes: Sequence[int]) -> int:
    """The per-rank block of a padded all-gather / gather: the largest of ``sizes`` rounded up to :data:`ALIGN`.

    Rank ``r``'s bytes then start at ``r * padded_block_size(sizes)``, 64-byte
    aligned. ``0`` for no sizes or only empty ones. Raises ``ValueError`` for a
    negative size.
    """
    largest = max((int(s) for s in sizes), default=0)
    if any(int(s) < 0 for s in sizes):
        raise ValueError(f"negative block size in {list(sizes)!r}")
    return align_up(largest)


def packed_offsets(sizes: Sequence[int], alignment: int = ALIGN) -> Tuple[List[int], int]:
    """Where each block starts when the blocks are packed one after another, each start aligned; and the total.

    ``alignment=1`` packs them with no gap (the concatenation of the blocks).
    """
    offsets: List[int] = []
    total = 0
    for n in sizes:
        if int(n) < 0:
            raise ValueError(f"negative block size in {list(sizes)!r}")
        offsets.append(total)
        total = align_up(total + int(n), alignment)
    return offsets, total


def blocks_at(buffer: memoryview, offsets: Sequence[int], sizes: Sequence[int]) -> List[memoryview]:
    """Views ``buffer[offsets[r] : offsets[r] + sizes[r]]`` (no copy); ``ValueError`` if one leaves the buffer."""
    out: List[memoryview] = []
    for r, (off, n) in enumerate(zip(offsets, sizes)):
        off, n = int(off), int(n)
        if off < 0 or n < 0 or off + n > buffer.nbytes:
            raise ValueError(f"block {r} ({n} bytes at {off}) lies outside the {buffer.nbytes}-byte receive buffer")
        out.append(buffer[off : off + n])
    return out


def split_blocks(buffer: memoryview, block: int, sizes: Sequence[int]) -> List[memoryview]:
    """Views of rank ``r``'s bytes in a receive buffer of ``len(sizes)`` blocks of ``block`` bytes (no copy).

    View ``r`` starts at ``r * block`` and is exactly ``sizes[r]`` bytes long.
    Raises ``ValueError`` when the buffer is too small or a size exceeds the block.
    """
    if buffer.nbytes < block * len(sizes):
        raise ValueError(f"receive buffer of {buffer.nbytes} bytes is smaller than {len(sizes)} x {block}")
    for r, n in enumerate(sizes):
        if not 0 <= int(n) <= block:
            raise ValueError(f"block {r} claims {int(n)} bytes, more than the {block}-byte block")
    return blocks_at(buffer, [r * block for r in range(len(sizes))], sizes)


# -- frames ------------------------------------------------------------------------------------


def write_block(out: memoryview, frame: Optional[Frame]) -> None:
    """Write ``frame`` at the start of ``out`` and zero the rest of it: no stale memory is ever sent.

    ``frame=None`` (a rank that sends nothing) zeroes all of ``out``. Raises
    ``ValueError`` when the frame does not fit.
    """
    size = frame.nbytes if frame is not None else 0
    if size > out.nbytes:
        raise ValueError(f"frame of {size} bytes does not fit in a {out.nbytes}-byte block")
    if frame is not None and size:
        frame.write_into(out[:size])
    if size < out.nbytes:
        import numpy as np

        np.frombuffer(out, dtype=np.uint8)[size:] = 0


def slot_frame(slot: memoryview) -> Frame:
    """The header slot of a collective as a :class:`Frame`: the slot exchange is then an all-gather of it.

    A transport moves it with the same code as a payload (``write_block``,
    ``write_range``, ``segment_view``); the slot's memory is not copied here.
    """
    view = memoryview(slot).cast("B") if memoryview(slot).format != "B" else memoryview(slot)
    return Frame([(0, view)], view.nbytes)


def sent_frame(call: Call) -> Frame:
    """``call.frame``, which the core gives to every rank that sends; ``RuntimeError`` where it is missing."""
    if call.frame is None:
        raise RuntimeError(f"{call.backend}: {call.op} on rank {call.rank} has no frame to send")
    return call.frame


# -- waiting -----------------------------------------------------------------------------------


def seconds_left(call: Call, cap: float = 1e9) -> float:
    """Seconds to the call's deadline for a transport's own timed wait: at least 1 ms, at most ``cap``."""
    return min(max(call.deadline - time.monotonic(), 0.001), cap)


def run_on_thread(call: Call, blocking: Callable[[], _T], what: str) -> _T:
    """Run ``blocking()`` -- a transport call that can be neither polled nor waited in slices -- on a helper thread.

    The calling thread waits for it through :meth:`Call.run_blocking` (Ctrl-C
    and the deadline are honoured; past the deadline the thread is left
    blocked and kept, and the core poisons the group). What ``blocking``
    raised is raised here. Two results mean more than a value: ``False`` is
    a transport's own timed wait that expired (``TimeoutError`` naming
    ``what``), and an object with a ``wait()`` method is a task the transport
    hands back already complete (waited here, so its error is raised).
    """
    result = call.run_blocking(blocking, what)
    if result is False:
        raise TimeoutError(f"{what} did not complete in time")
    wait = getattr(result, "wait", None)
    if callable(wait):
        wait()
    return result  # type: ignore[no-any-return]


_kept_lock = threading.Lock()
_kept_ids: Set[int] = set()


def keep_until_exit(obj: Any) -> None:
    """Keep ``obj`` (a failed group, a blocked transport) alive until the process ends, even through shutdown.

    After a collective failed, a transport's worker thread may still be blocked
    reading from a peer; destroying the group -- explicitly or when the
    interpreter clears module globals at exit -- would join that thread and
    hang the process for the transport's own timeout. One reference that is
    never released (``Py_IncRef``) keeps it; where that is not possible (not
    CPython) :func:`keep_forever` does, up to module teardown. Idempotent.
    """
    with _kept_lock:
        if id(obj) in _kept_ids:
            return
        _kept_ids.add(id(obj))
    keep_forever(obj)
    try:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    except Exception:  # not CPython
        logger.debug("mmeval: could not pin %r until exit", obj, exc_info=True)


# -- groups ------------------------------------------------------------------------------------


class GroupToken:
    """The sequence key of one group (see ``FramedDistBackend._sequence_key``), holding no reference to it.

    ``label`` names the group in messages; ``state`` holds what a backend
    learnt about the group (e.g. which transport serves which device).
    """

    __slots__ = ("label", "state", "__weakref__")

    def __init__(self, label: str) -> None:
        self.label = label
        self.state: Dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<group {self.label}>"


class GroupTokens:
    """One :class:`GroupToken` per live group object (and qualifier), dropped when the group object is.

    For transports whose group is a weak-referenceable Python object (a
    process group, a process set): backends over the same object (and the
    same ``qualifiers``) share one token, so one collective sequence and one
    fate; a new object starts clean even when the transport reuses the old
    one's numeric id. Groups are told apart by identity (an ``__eq__`` or an
    unhashable group class does not matter). Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()  # a weakref callback may run (GC) while token() holds it
        self._tables: Dict[int, Tuple["weakref.ref[Any]", Dict[Hashable, GroupToken]]] = {}

    def token(self, group: Any, *qualifiers: Hashable, label: Optional[str] = None) -> GroupToken:
        """The token of ``group`` (with ``qualifiers``); ``label`` names a new one (default: the group's id).

        Raises ``TypeError`` when ``group`` cannot be weakly referenced (use a
        value key -- a tuple that is never reused -- for such groups).
        """
        key = id(group)
        with self._lock:
            entry = self._tables.get(key)
            if entry is None or entry[0]() is not group:
                entry = self._tables[key] = (weakref.ref(group, self._forget(key)), {})
            table = entry[1]
            token = table.get(qualifiers)
            if token is None:
                token = table[qualifiers] = GroupToken(label if label is not None else f"{key:#x}")
            return token

    def _forget(self, key: int) -> Callable[["weakref.ref[Any]"], None]:
        def forget(ref: "weakref.ref[Any]") -> None:
            with self._lock:
                entry = self._tables.get(key)
                if entry is not None and entry[0] is ref:
                    del self._tables[key]

        return forget


def not_a_member(backend: str, who: str, group: str = "the group") -> RuntimeError:
    """The error for a process that uses a backend over a group it does not belong to.

    ``who`` says which process (``'global rank 3'``), ``group`` which group.
    """
    return RuntimeError(
        f"{backend}: this process ({who}) is not a member of {group} given to the backend; only the group's "
        "members may use it"
    )


# -- start-up that cannot be interrupted -------------------------------------------------------

_WATCHDOG = r"""
import os, select, signal, sys, time
pid, seconds, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
ready, _, _ = select.select([sys.stdin], [], [], seconds)
if not ready:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    try:
        os.kill(pid, signal.SIGTERM)
        time.sleep(2.0)
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""


@contextlib.contextmanager
def start_up_watchdog(seconds: float, message: str) -> Iterator[None]:
    """Bound a runtime's start-up that blocks without releasing the interpreter (e.g. ``MPI_Init``).

    Such a call waits for every peer and cannot be interrupted from Python
    (no other thread runs, signal handlers do not run). A small watchdog
    process is started; if the block has not finished within ``seconds``, it
    writes ``message`` to this process's stderr and terminates the process
    (SIGTERM, then SIGKILL), so the launcher ends the job instead of it hanging
    forever. Leaving the block, normally or by an exception, stops the
    watchdog. ``seconds`` of ``inf`` starts none.
    """
    if seconds == float("inf") or sys.platform == "win32":
        yield
        return
    watchdog = subprocess.Popen(
        [sys.executable, "-S", "-c", _WATCHDOG, str(os.getpid()), repr(float(seconds)), message],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        close_fds=True,
    )
    try:
        yield
    finally:
        assert watchdog.stdin is not None
        watchdog.stdin.close()  # end of file: the watchdog's wait returns and it exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(5.0)
