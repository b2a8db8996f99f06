"""A framework-free FramedDistBackend for the core tests: ranks relay through rank 0 over TCP.

It exercises the whole frame protocol (slots, inline payloads, byte
collectives, error propagation, timeouts) with real processes and sockets.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from mmeval.core.dist_backends import Call, FramedDistBackend
from mmeval.testing import ranks
from mmeval.testing.ranks import free_port

__all__ = ["HubDist", "free_port", "run_ranks"]

_KEY = b"hub"


class HubDist(FramedDistBackend):
    name = "hub"

    def __init__(self, rank: int, world_size: int, addr: tuple, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rank, self._ws, self._addr = rank, world_size, addr
        self._conns: Dict[int, Connection] = {}
        if world_size > 1:
            self._connect()

    @property
    def is_initialized(self) -> bool:
        return True

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._ws

    def _connect(self) -> None:
        # addr: (host, port), or (host, a file path) -- rank 0 then listens on a port the OS picks and writes it
        # there, so no other process can take the port between choosing it and binding it (a port from
        # free_port() in the parent can be: "Address already in use" in a CI run with envs side by side)
        host, where = self._addr
        if self._rank == 0:
            listener = Listener((host, 0 if isinstance(where, str) else where), authkey=_KEY)
            if isinstance(where, str):
                with open(where + ".tmp", "w") as f:
                    f.write(str(listener.address[1]))
                os.replace(where + ".tmp", where)
            while len(self._conns) < self._ws - 1:
                c = listener.accept()
                _no_delay(c)
                self._conns[c.recv()] = c
            self._listener = listener
        else:
            deadline = time.monotonic() + 30
            while True:
                try:
                    port = where if not isinstance(where, str) else _published_port(where)
                    if port is not None:
                        c = Client((host, port), authkey=_KEY)
                        break
                except ConnectionRefusedError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"hub rank {self._rank}: rank 0 did not listen at {self._addr} within 30 s")
                time.sleep(0.02)
            _no_delay(c)
            c.send(self._rank)
            self._conns[0] = c

    def _recv(self, call: Call, c: Connection) -> bytes:
        # the core's sliced wait: Ctrl-C and the deadline are honoured while a peer is late
        call.wait(lambda seconds: c.poll(seconds), "a message from a peer")
        return c.recv_bytes()

    def _allgather(self, call: Call, blob: bytes) -> List[bytes]:
        if self._rank == 0:
            blobs = [blob] + [self._recv(call, self._conns[r]) for r in range(1, self._ws)]
            for r in range(1, self._ws):
                for b in blobs:
                    self._conns[r].send_bytes(b)
            return blobs
        self._conns[0].send_bytes(blob)
        return [self._recv(call, self._conns[0]) for _ in range(self._ws)]

    def _fill(self, size: int, fill: Callable[[memoryview], None]) -> bytes:
        buf = bytearray(size)
        fill(memoryview(buf))
        return bytes(buf)

    def _exchange_slots(self, call: Call, slot: memoryview) -> Sequence[memoryview]:
        return [memoryview(b) for b in self._allgather(call, bytes(slot))]

    def _all_gather_bytes(self, call: Call) -> Sequence[memoryview]:
        return [memoryview(b) for b in self._allgather(call, self._fill(call.size, call.fill))]

    # gather and broadcast: the core's defaults, over _all_gather_bytes


@contextlib.contextmanager
def tcp_socket(c: Connection) -> Iterator[socket.socket]:
    """A connection's TCP socket, for its options: a duplicate of the same socket, closed after."""
    s = socket.fromfd(c.fileno(), socket.AF_INET, socket.SOCK_STREAM)
    try:
        yield s
    finally:
        s.close()


def _no_delay(c: Connection) -> None:
    """TCP_NODELAY on a connection's socket. Rank 0 sends each rank the world's messages one after another:
    with Nagle's algorithm on, every message after the first waited for the peer's delayed ACK (~40 ms on
    Linux), so each collective took ~44 ms whatever it carried."""
    with tcp_socket(c) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _published_port(path: str) -> Optional[int]:
    """The port rank 0 wrote to ``path``; None until it has."""
    try:
        with open(path) as f:
            return int(f.read())
    except FileNotFoundError:
        return None


def _hub_rank(rank: int, world_size: int, fn: Callable, addr: tuple, kwargs: dict, args: tuple) -> Any:
    if "per_rank" in kwargs:  # {"per_rank": [kwargs of rank 0, kwargs of rank 1, ...]}
        kwargs = kwargs["per_rank"][rank]
    return fn(HubDist(rank, world_size, addr, **kwargs), *args)


def run_ranks(
    fn: Callable,
    world_size: int,
    *args: Any,
    timeout: float = 60,
    backend_kwargs: Optional[dict] = None,
    allow_missing: Sequence[int] = (),
) -> Dict[int, tuple]:
    """Run ``fn(backend, *args)`` on ``world_size`` hub ranks (:func:`mmeval.testing.ranks.run_ranks`).

    Returns ``{rank: ("ok", value)}`` or ``{rank: ("error", (class name, message, traceback))}``; a
    rank that died or missed ``timeout`` fails the test unless it is in ``allow_missing`` (then it is left out).
    """
    with tempfile.TemporaryDirectory(prefix="mmeval-hub-") as tmp:
        addr = ("127.0.0.1", os.path.join(tmp, "port"))
        outcomes = ranks.run_ranks(_hub_rank, world_size, fn, addr, backend_kwargs or {}, args, timeout=timeout)
    out: Dict[int, tuple] = {}
    for o in outcomes:
        if o.ok:
            out[o.rank] = ("ok", o.value)
        elif o.status == "raised":
            out[o.rank] = ("error", (o.error_type.rsplit(".", 1)[-1], o.message, o.traceback))
    lost = [o for o in outcomes if o.rank not in out and o.rank not in allow_missing]
    if lost:
        raise AssertionError(f"hub ranks did not finish within {timeout}s:\n" + "\n".join(map(str, lost)))
    return out
