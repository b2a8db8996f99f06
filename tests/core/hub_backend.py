"""A framework-free FramedDistBackend for the core tests: ranks relay through rank 0 over TCP.

It exercises the whole frame protocol (slots, inline payloads, byte
collectives, error propagation, timeouts) with real processes and sockets.
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import time
import traceback
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Callable, Dict, List, Optional, Sequence

from mmeval.core.dist_backends import Call, FramedDistBackend

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
        if self._rank == 0:
            listener = Listener(self._addr, authkey=_KEY)
            while len(self._conns) < self._ws - 1:
                c = listener.accept()
                self._conns[c.recv()] = c
            self._listener = listener
        else:
            deadline = time.monotonic() + 30
            while True:
                try:
                    c = Client(self._addr, authkey=_KEY)
                    break
                except ConnectionRefusedError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(fn: Callable, rank: int, ws: int, addr: tuple, queue: Any, kwargs: dict, args: tuple) -> None:
    try:
        if "per_rank" in kwargs:  # {"per_rank": [kwargs of rank 0, kwargs of rank 1, ...]}
            kwargs = kwargs["per_rank"][rank]
        backend = HubDist(rank, ws, addr, **kwargs)
        queue.put((rank, "ok", fn(backend, *args)))
    except BaseException as exc:  # report everything, including our own errors
        queue.put((rank, "error", (type(exc).__name__, str(exc), traceback.format_exc())))


def run_ranks(fn: Callable, world_size: int, *args: Any, timeout: float = 60, backend_kwargs: Optional[dict] = None,
              allow_missing: Sequence[int] = ()) -> Dict[int, tuple]:
    """Run ``fn(backend, *args)`` in ``world_size`` spawned processes; return {rank: (status, value)}."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    addr = ("127.0.0.1", free_port())
    procs = [ctx.Process(target=_entry, args=(fn, r, world_size, addr, queue, backend_kwargs or {}, args))
             for r in range(world_size)]
    for p in procs:
        p.start()
    out: Dict[int, tuple] = {}
    deadline = time.monotonic() + timeout
    expected = world_size - len(allow_missing)
    try:
        while len(out) < expected and time.monotonic() < deadline:
            try:
                rank, status, value = queue.get(timeout=0.2)
            except Exception:
                continue
            out[rank] = (status, value)
    finally:
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
    if len(out) < expected:
        raise AssertionError(f"ranks did not finish within {timeout}s: got {sorted(out)}")
    return out
