"""A userspace TCP relay between two namespace hosts: the fallback for netem where the kernel has none.

Run by :mod:`relayed_hosts` in each host's namespace, never imported by a test::

    python relay.py --peer-service G_PEER --ports LO-HI[,P] --peer-relay ADDR:PORT \\
        --serve ADDR:PORT --local-service G_SELF [--delay-ms D] [--stall-prob P --stall-ms S] \\
        --seed N --status FILE

Two roles in one process:

* **outgoing**: it listens on ``G_PEER:P`` for every port P of ``LO-HI`` (the
  peer host's service address is a local address of this namespace, so every
  connection a rank makes to the other host lands here), and forwards each
  connection to the peer's relay at ``--peer-relay``, sending the port P first
  (2 bytes, big-endian);
* **incoming**: it accepts the peer relay's connections on ``--serve``, reads
  the port and connects to ``G_SELF:P`` in this namespace.

Every chunk of bytes read is written on after ``--delay-ms`` (latency, each
direction, without limiting the throughput). TCP cannot lose bytes: a lost
segment costs the receiver a stall until the sender retransmits (at least the
200 ms minimum RTO of Linux), so loss is modelled as that stall: with
probability ``--stall-prob`` per chunk, that direction of that connection
waits ``--stall-ms`` more (what follows waits behind it, as behind a lost
segment). ``SIGUSR1`` stalls every connection until ``SIGUSR2`` (a link that
carries nothing, sockets still open: the peers see no reset). ``SIGHUP``
resets every connection (a middlebox's RST: both ends see
``ECONNRESET``; connections made later are relayed again). ``SIGTERM``
ends the relay (so does ``--lifetime``). The status file gets one JSON line
with the bytes forwarded each way when the relay is ready, every 0.5 s, when
it is signalled and at exit.
"""

from __future__ import annotations

import argparse
import json
import queue
import random
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from typing import List, Optional, Set, Tuple

CHUNK = 1 << 16
PORT = struct.Struct(">H")

_stalled = threading.Event()
_reset = threading.Event()
_done = threading.Event()
_conns: List[socket.socket] = []
_aborted: Set[socket.socket] = set()
_lock = threading.Lock()
_bytes = {"out": 0, "in": 0}


def _addr(text: str) -> Tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


class Pump:
    """One direction of one connection: a reader thread queues chunks, a writer thread sends them when due."""

    def __init__(self, src: socket.socket, dst: socket.socket, way: str, args: argparse.Namespace, rng: random.Random):
        self.src, self.dst, self.way, self.args, self.rng = src, dst, way, args, rng
        self.q: "queue.Queue[Optional[Tuple[float, bytes]]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                data = self.src.recv(CHUNK)
                if not data:
                    break
                self.q.put((time.monotonic() + self.args.delay_ms / 1000.0, data))
        except OSError:
            pass
        if self.src in _aborted:
            self.src.close()  # SO_LINGER 0 is set: the kernel sends a reset, not a FIN
        self.q.put(None)

    def _write(self) -> None:
        while True:
            item = self.q.get()
            if self.dst in _aborted:
                return  # reset: no FIN to pass on
            if item is None:
                break
            due, data = item
            _sleep_until(due)
            if self.args.stall_prob and self.rng.random() < self.args.stall_prob:
                time.sleep(self.args.stall_ms / 1000.0)  # what follows waits behind it (already due: sent at once)
            while _stalled.is_set() and not _done.is_set():
                time.sleep(0.02)
            try:
                self.dst.sendall(data)
            except OSError:
                break
            with _lock:
                _bytes[self.way] += len(data)
        for s in (self.dst, self.src):
            try:
                s.shutdown(socket.SHUT_WR if s is self.dst else socket.SHUT_RD)
            except OSError:
                pass


def _sleep_until(t: float) -> None:
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


def _join(a: socket.socket, b: socket.socket, args: argparse.Namespace, rng: random.Random) -> None:
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with _lock:
        _conns.extend((a, b))
    Pump(a, b, "out", args, random.Random(rng.random()))
    Pump(b, a, "in", args, random.Random(rng.random()))


def _outgoing(conn: socket.socket, port: int, args: argparse.Namespace, rng: random.Random) -> None:
    try:
        up = socket.create_connection(_addr(args.peer_relay), timeout=10)
        up.settimeout(None)
        up.sendall(PORT.pack(port))
    except OSError:
        conn.close()  # the peer is unreachable: the rank sees its connection closed
        return
    _join(conn, up, args, rng)


def _incoming(conn: socket.socket, args: argparse.Namespace, rng: random.Random) -> None:
    try:
        conn.settimeout(10)
        head = b""
        while len(head) < PORT.size:
            more = conn.recv(PORT.size - len(head))
            if not more:
                raise OSError("closed before the port")
            head += more
        conn.settimeout(None)
        (port,) = PORT.unpack(head)
        # from the peer's service address (local here, on lo): the rank sees the connection come from the other host
        down = socket.create_connection((args.local_service, port), timeout=10, source_address=(args.peer_service, 0))
        down.settimeout(None)
    except OSError:
        conn.close()  # nothing listens there: the connecting rank sees its connection closed, as without a relay
        return
    _join(down, conn, args, rng)


def _reset_all() -> None:
    """Abort every connection: SO_LINGER 0, then wake the readers, which close their socket (a reset each way)."""
    with _lock:
        conns = list(_conns)
        _conns.clear()
        _aborted.update(conns)
    _reset.clear()
    for s in conns:
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.shutdown(socket.SHUT_RD)  # sends nothing; the blocked recv returns
        except OSError:
            pass


def _write_status(path: str) -> None:
    with _lock:
        line = json.dumps({"t": time.monotonic(), "stalled": _stalled.is_set(), **_bytes})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--peer-service", required=True)
    p.add_argument("--ports", required=True, help="LO-HI[,PORT...]: the peer's ports to relay")
    p.add_argument("--peer-relay", required=True)
    p.add_argument("--serve", required=True)
    p.add_argument("--local-service", required=True)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--stall-prob", type=float, default=0.0)
    p.add_argument("--stall-ms", type=float, default=200.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--status", required=True)
    p.add_argument("--lifetime", type=float, default=900.0, help="seconds after which the relay ends by itself")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    span, *more = args.ports.split(",")
    lo, _, hi = span.partition("-")

    sel = selectors.DefaultSelector()
    listeners = []
    for port in [*range(int(lo), int(hi) + 1), *map(int, more)]:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((args.peer_service, port))
        s.listen(64)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, port)
        listeners.append(s)
    serve = socket.socket()
    serve.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    serve.bind(_addr(args.serve))
    serve.listen(64)
    serve.setblocking(False)
    sel.register(serve, selectors.EVENT_READ, None)

    signal.signal(signal.SIGUSR1, lambda *_: (_stalled.set(), _write_status(args.status)))
    signal.signal(signal.SIGUSR2, lambda *_: (_stalled.clear(), _write_status(args.status)))
    signal.signal(signal.SIGHUP, lambda *_: _reset.set())
    signal.signal(signal.SIGTERM, lambda *_: _done.set())
    _write_status(args.status)  # ready: every listener is bound
    end = time.monotonic() + args.lifetime
    written = time.monotonic()
    while not _done.is_set() and time.monotonic() < end:
        if _reset.is_set():
            _reset_all()
            _write_status(args.status)
        if time.monotonic() - written > 0.5:
            _write_status(args.status)
            written = time.monotonic()
        for key, _ in sel.select(timeout=0.2):
            try:
                conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
            except OSError:
                continue
            conn.setblocking(True)
            if key.data is None:
                threading.Thread(target=_incoming, args=(conn, args, rng), daemon=True).start()
            else:
                threading.Thread(target=_outgoing, args=(conn, key.data, args, rng), daemon=True).start()
    _done.set()
    _write_status(args.status)
    sys.exit(0)


if __name__ == "__main__":
    main()
