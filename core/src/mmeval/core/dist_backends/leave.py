"""When this process's part ends, tell the peers: one callback per transport, run once, with the reason.

A transport whose peers cannot see a process leave (MPI: a rank that left is
not an error to its peers, which wait for it until their timeout) registers
a callback with :func:`on_leave` when its backend is built, or -- for a
process that leaves before it ever built one -- declares it as an entry point
of the group ``mmeval.leave_notices`` whose *name* is the module that must be
loaded for it to matter (``"mpi4py.MPI" = "mmeval_mpi4py.notice:send_notices"``:
loaded and run only when ``mpi4py.MPI`` was imported). :func:`install` (run
when :mod:`mmeval.core.dist_backends` is imported) puts the exception hook and
the exit handler in place. The callbacks run once, with a sentence saying why,
at the first of:

* an uncaught exception in the main thread (``sys.excepthook``; the previous
  hook then prints the traceback as before);
* the interpreter's exit (``atexit``: the end of the script or ``sys.exit``);
* a catchable termination signal (``SIGTERM``, ``SIGHUP``) whose handler was
  the default, once a callback was registered with :func:`on_leave`: the
  callbacks run, the default handler is put back and the signal raised again,
  so the process still ends by that signal. (Python runs a signal handler only
  between two bytecodes of the main thread: a process blocked in a long C call
  runs it when the call returns.)

``SIGKILL``, ``os._exit`` and a lost host run nothing: peers then learn it
from the transport or at their timeout. A callback must be quick and bounded
(it runs at exit) and must not raise; what it raises is logged. No framework is
imported here.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading
from types import TracebackType
from typing import Any, Callable, List, Optional, Type

__all__ = ["LEAVE", "LeaveNotices", "install", "on_leave", "leaving", "LEAVE_SIGNALS", "ENTRY_POINT_GROUP"]

#: Signals whose default handler is replaced by one that tells the peers first (where the platform has them).
LEAVE_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

#: The entry-point group of the plugins' leave callbacks (see the module).
ENTRY_POINT_GROUP = "mmeval.leave_notices"


class LeaveNotices:
    """This process's leave state on one instance (as the registry's and the hooks' are): the callbacks, whether
    they ran, and which handlers are installed. :data:`LEAVE` is the process's one; the module's functions are
    its methods."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: List[Callable[[str, bool], None]] = []
        self._fired = False
        self._installed = False
        self._signals = False

    def install(self) -> None:
        """Put the exception hook and the exit handler in place (once; they do nothing until a process leaves)."""
        with self._lock:
            if self._installed:
                return
            self._installed = True
        previous_hook = sys.excepthook

        def excepthook(kind: Type[BaseException], value: BaseException, tb: Optional[TracebackType]) -> None:
            previous_hook(kind, value, tb)  # the traceback first: telling the peers may wait for theirs
            self.leaving(f"an uncaught {kind.__name__}: {value}" if str(value) else f"an uncaught {kind.__name__}")

        sys.excepthook = excepthook
        atexit.register(self.leaving, "the process exited (the end of the script, or sys.exit)")
        if _declared(load=False):  # a runtime whose peers need telling is loaded already (mpi4py.MPI imported first)
            self._install_signals()

    def on_leave(self, callback: Callable[[str, bool], None]) -> None:
        """Run ``callback(why, linger)`` once when this process's part ends (see the module); idempotent per callback.

        Also installs the signal handlers (from the main thread only). A callback
        registered after the process announced its leaving is not run.
        """
        self.install()
        with self._lock:
            if callback not in self._callbacks:
                self._callbacks.append(callback)
        self._install_signals()

    def _install_signals(self) -> None:
        with self._lock:
            if self._signals or threading.current_thread() is not threading.main_thread():
                return
            self._signals = True
        for sig in LEAVE_SIGNALS:
            try:
                if signal.getsignal(sig) is signal.SIG_DFL:
                    signal.signal(sig, self._on_signal)
            except (ValueError, OSError):  # not settable here
                pass

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.leaving(f"signal {signal.Signals(signum).name}", linger=False)
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    def leaving(self, why: str, linger: bool = True) -> None:
        """Run every callback once, ``callback(why, linger)``: those registered, then the entry points whose module
        is loaded.

        ``linger`` is false when the process must end now (a signal): a callback
        then must not wait for the peers. Later calls do nothing.
        """
        with self._lock:
            if self._fired:
                return
            self._fired = True
            callbacks = list(self._callbacks)
        for callback in callbacks + [c for c in _declared() if c not in callbacks]:
            try:
                callback(why.strip(), linger)
            except Exception:
                _warn("mmeval: telling the peers that this process leaves failed")


def _declared(load: bool = True) -> List[Any]:
    """The callbacks of :data:`ENTRY_POINT_GROUP` whose module (the entry point's name) is loaded.

    ``load=False``: the entry points themselves, not loaded.
    """
    try:
        from importlib.metadata import entry_points

        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name in sys.modules]
    except Exception:
        return []
    if not load:
        return found
    out: List[Any] = []
    for ep in found:
        try:
            out.append(ep.load())
        except Exception:
            _warn(f"mmeval: the leave callback {ep.value} could not be loaded")
    return out


def _warn(message: str) -> None:
    """Log ``message`` with the exception being handled (``logging`` is imported only then: listing stays light)."""
    from ..settings import logger

    logger().warning(message, exc_info=True)


#: The process's leave state; :func:`install`, :func:`on_leave` and :func:`leaving` are its methods.
LEAVE = LeaveNotices()
install = LEAVE.install
on_leave = LEAVE.on_leave
leaving = LEAVE.leaving
