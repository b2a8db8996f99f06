"""Two "hosts" on one machine: two network namespaces joined by one veth pair.

:class:`TwoHosts` creates namespaces ``mmrel<pid>a`` / ``mmrel<pid>b``, a veth
pair whose ends are both named :data:`IFNAME` (one in each namespace), and
the addresses ``198.18.X.1/24`` and ``198.18.X.2/24`` (198.18.0.0/15 is the
range reserved for benchmarking networks, RFC 2544), X chosen so that no
interface or route of the machine uses ``198.18.X.0/24``. Nothing outside the
two namespaces is touched; :meth:`TwoHosts.close` SIGKILLs what still runs in
them and deletes both (which deletes the veth pair). Every ``ip`` call has a
timeout.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List, Optional

#: Name of the veth end in each namespace (the same in both, so one GLOO_SOCKET_IFNAME / FI_TCP_IFACE fits all).
IFNAME = "mmrel0"


def unavailable() -> Optional[str]:
    """Why namespaces cannot be made here (``None`` when they can)."""
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"mmrelprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:
        return f"'ip netns add' failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip ARGS`` (30 s at most); its stdout."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def free_subnet() -> str:
    """``198.18.X`` for the first X from 200 + pid % 40 to 254 that no address or route of this machine mentions."""
    used = ip("-o", "addr") + ip("route") + ip("-4", "route", "show", "table", "all", check=False)
    for x in range(200 + os.getpid() % 40, 255):
        prefix = f"198.18.{x}"
        if prefix + "." not in used:
            return prefix
    raise RuntimeError("no free 198.18.X.0/24 subnet")


class TwoHosts:
    """Namespaces ``a`` and ``b`` joined by a veth pair; ``addr_a`` / ``addr_b`` their addresses."""

    def __init__(self) -> None:
        tag = f"mmrel{os.getpid()}"
        self.ns_a, self.ns_b = tag + "a", tag + "b"
        prefix = free_subnet()
        self.addr_a, self.addr_b = prefix + ".1", prefix + ".2"
        self._made: List[str] = []
        try:
            for ns in (self.ns_a, self.ns_b):
                ip("netns", "add", ns)
                self._made.append(ns)
            ip("link", "add", IFNAME, "netns", self.ns_a, "type", "veth", "peer", "name", IFNAME, "netns", self.ns_b)
            for ns, addr in ((self.ns_a, self.addr_a), (self.ns_b, self.addr_b)):
                # IPv4 only: a tentative IPv6 link-local address (duplicate detection takes ~2 s) makes
                # libfabric's tcp provider fail to listen ("ep_enable failed: Bad file descriptor")
                ip("-n", ns, "link", "set", IFNAME, "addrgenmode", "none")
                ip("-n", ns, "addr", "add", f"{addr}/24", "dev", IFNAME)
                ip("-n", ns, "link", "set", "lo", "up")
                ip("-n", ns, "link", "set", IFNAME, "up")
            self._wait_until_joined()
        except BaseException:
            self.close()
            raise

    def _wait_until_joined(self, timeout: float = 20.0) -> None:
        """Wait until both ends are up and a TCP connection from b to a goes through (bounded)."""
        deadline = time.monotonic() + timeout
        while not all("LOWER_UP" in ip("-n", ns, "-o", "link", "show", IFNAME) for ns in (self.ns_a, self.ns_b)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the veth pair {IFNAME} did not come up within {timeout:g}s")
            time.sleep(0.05)
        server = (
            "import socket,sys\n"
            "s=socket.socket(); s.settimeout(15); s.bind((sys.argv[1], 0)); s.listen(1)\n"
            "print(s.getsockname()[1], flush=True); c,_=s.accept(); c.sendall(b'ok'); c.close()\n"
        )
        client = (
            "import socket,sys\nprint(socket.create_connection((sys.argv[1], int(sys.argv[2])), 15).recv(2).decode())\n"
        )
        with subprocess.Popen(
            [*self.exec_prefix(self.ns_a), sys.executable, "-c", server, self.addr_a], stdout=subprocess.PIPE, text=True
        ) as srv:
            try:
                assert srv.stdout is not None
                port = srv.stdout.readline().strip()
                got = subprocess.run(
                    [*self.exec_prefix(self.ns_b), sys.executable, "-c", client, self.addr_a, port],
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
                if got.stdout.strip() != "ok":
                    raise RuntimeError(f"no TCP connection from {self.ns_b} to {self.addr_a}: {got.stderr.strip()}")
            finally:
                srv.kill()

    def exec_prefix(self, ns: str) -> List[str]:
        """The command prefix that runs a program in namespace ``ns``."""
        return ["ip", "netns", "exec", ns]

    def netem(self, *spec: str) -> None:
        """Shape both ends of the link with netem (``'delay', '100ms', 'loss', '5%'``), so both directions."""
        for ns in (self.ns_a, self.ns_b):
            proc = subprocess.run(
                ["tc", "-n", ns, "qdisc", "replace", "dev", IFNAME, "root", "netem", *spec],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"tc netem {' '.join(spec)} failed in {ns}: {proc.stderr.strip()}")

    def cut(self) -> None:
        """Take the link down (from host a's side: b's end loses its carrier too)."""
        ip("-n", self.ns_a, "link", "set", IFNAME, "down")

    def pids(self) -> List[int]:
        """Processes running in either namespace now (all of them started by the test)."""
        out: List[int] = []
        for ns in self._made:
            out += [int(p) for p in ip("netns", "pids", ns, check=False).split()]
        return out

    def launcher_exec(self, directory: Path) -> Path:
        """An ``ssh`` stand-in: ``SCRIPT [OPTIONS] HOST [OPTIONS] COMMAND...`` runs COMMAND in HOST's namespace.

        Hydra calls ``SCRIPT -x HOST 'command ...'``; horovodrun (the script
        as ``ssh`` on ``PATH``) ``ssh -o K=V -o K=V HOST [-p P] [-i F] [-o
        ConnectTimeout=T] 'command ...'``: what precedes HOST is dropped, and
        after it the options ``-o`` / ``-p`` / ``-i`` / ``-l`` with their values.
        """
        script = directory / "netns-ssh.sh"
        script.write_text(
            "#!/bin/sh\n"
            "# ssh's call: drop what precedes HOST, then ssh's options after it; run the rest in HOST's namespace\n"
            "ns=\n"
            'while [ $# -gt 0 ] && [ -z "$ns" ]; do\n'
            '  case "$1" in\n'
            f"    {self.addr_a}) ns={self.ns_a} ;;\n"
            f"    {self.addr_b}) ns={self.ns_b} ;;\n"
            "  esac\n"
            "  shift\n"
            "done\n"
            "while [ $# -gt 0 ]; do\n"
            '  case "$1" in\n'
            "    -o|-p|-i|-l) shift 2 ;;\n"
            "    *) break ;;\n"
            "  esac\n"
            "done\n"
            'exec ip netns exec "$ns" sh -c "$*"\n'
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return script

    def close(self) -> None:
        """SIGKILL what runs in the namespaces, then delete them (and with them the veth pair)."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for ns in reversed(self._made):
            ip("netns", "del", ns, check=False)
        self._made = []

    def __enter__(self) -> "TwoHosts":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
