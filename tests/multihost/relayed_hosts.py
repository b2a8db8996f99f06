"""Every cross-host TCP connection of two namespace hosts through :mod:`relay` (latency and loss without netem).

The ranks do not use the veth's addresses: each host ``h`` gets a *service
address* ``G_h`` (``198.19.X.1`` / ``.2``, in 198.18.0.0/15 like the veth's)
on an interface of its own (:data:`SERVICE_IF`, one end of a veth pair inside
the namespace; ``GLOO_SOCKET_IFNAME`` names it, so gloo listens on ``G_h``),
and the *other* host's service address is a local address of each namespace
(on ``lo``). So a rank of host b connecting to ``G_a:P`` reaches b's own
relay, listening on ``G_a:P`` for every port the ranks of a can use (each
namespace's ephemeral range is narrowed to its own of :data:`PORTS`, and the
rendezvous port on a is :data:`RDZV_PORT`); the relay carries it over the
veth to a's relay, which connects to ``G_a:P`` in a. The two ranges are
disjoint: a connection from b to ``G_a`` takes its source port from b's range,
never one of the relay's listeners. No netfilter, no routes: ``ip`` only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import netns

HERE = Path(__file__).resolve().parent
#: The interface carrying a host's service address (gloo's interface when relayed).
SERVICE_IF = "mmrelg0"
#: Host a's and host b's ephemeral port ranges (what gloo's listeners bind), and the rendezvous port on a.
PORTS = ((47000, 47099), (47100, 47199))
RDZV_PORT = 47300
#: The port each relay accepts the other relay's connections on (on the veth address).
RELAY_PORT = 47200


def _sh(ns: str, script: str) -> None:
    proc = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", script], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"in {ns}: {script!r} failed: {proc.stderr.strip()}")


class Relayed:
    """The relays of :class:`netns.TwoHosts` ``hosts``; ``service[ns]`` is the address the ranks of ``ns`` use."""

    def __init__(
        self,
        hosts: netns.TwoHosts,
        directory: Path,
        delay_ms: float = 0.0,
        stall_prob: float = 0.0,
        stall_ms: float = 200.0,
    ) -> None:
        self.hosts = hosts
        x = hosts.addr_a.split(".")[2]
        prefix = f"198.19.{x}"
        used = netns.ip("-o", "addr") + netns.ip("route")
        if prefix + "." in used:  # pragma: no cover - a machine using 198.19.X already
            raise RuntimeError(f"{prefix}.0/24 is in use on this machine: no service addresses for the relay")
        self.service = {hosts.ns_a: prefix + ".1", hosts.ns_b: prefix + ".2"}
        self.veth = {hosts.ns_a: hosts.addr_a, hosts.ns_b: hosts.addr_b}
        self.procs: Dict[str, subprocess.Popen] = {}
        self.status = {ns: directory / f"relay-{ns}.jsonl" for ns in self.service}
        peer = {hosts.ns_a: hosts.ns_b, hosts.ns_b: hosts.ns_a}
        ports = {hosts.ns_a: PORTS[0], hosts.ns_b: PORTS[1]}
        for ns, addr in self.service.items():
            other = self.service[peer[ns]]
            netns.ip("-n", ns, "link", "add", SERVICE_IF, "type", "veth", "peer", "name", SERVICE_IF + "p")
            netns.ip("-n", ns, "link", "set", SERVICE_IF, "addrgenmode", "none")
            netns.ip("-n", ns, "addr", "add", f"{addr}/32", "dev", SERVICE_IF)
            netns.ip("-n", ns, "link", "set", SERVICE_IF + "p", "up")
            netns.ip("-n", ns, "link", "set", SERVICE_IF, "up")
            netns.ip("-n", ns, "addr", "add", f"{other}/32", "dev", "lo")
            _sh(ns, "echo {} {} > /proc/sys/net/ipv4/ip_local_port_range".format(*ports[ns]))
        for ns in self.service:
            lo, hi = ports[peer[ns]]
            cmd = [
                *hosts.exec_prefix(ns),
                sys.executable,
                str(HERE / "relay.py"),
                "--peer-service",
                self.service[peer[ns]],
                "--ports",
                f"{lo}-{hi}" + (f",{RDZV_PORT}" if peer[ns] == hosts.ns_a else ""),
                "--peer-relay",
                f"{self.veth[peer[ns]]}:{RELAY_PORT}",
                "--serve",
                f"{self.veth[ns]}:{RELAY_PORT}",
                "--local-service",
                self.service[ns],
                "--delay-ms",
                str(delay_ms),
                "--stall-prob",
                str(stall_prob),
                "--stall-ms",
                str(stall_ms),
                "--seed",
                str(len(self.procs) + 1),
                "--status",
                str(self.status[ns]),
            ]
            log = open(directory / f"relay-{ns}.log", "wb")
            try:
                self.procs[ns] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            finally:
                log.close()
        deadline = time.monotonic() + 30
        while not all(p.exists() and p.read_text().strip() for p in self.status.values()):
            dead = [ns for ns, p in self.procs.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = {ns: (directory / f"relay-{ns}.log").read_text(errors="replace")[-2000:] for ns in self.procs}
                raise RuntimeError(f"the relays did not start (exited: {dead}): {logs}")
            time.sleep(0.05)

    def stall(self) -> None:
        """Both relays stop forwarding (connections stay open: no reset reaches anyone)."""
        for p in self.procs.values():
            p.send_signal(signal.SIGUSR1)

    def reset(self) -> None:
        """Both relays reset every connection they carry (each end sees ``ECONNRESET``)."""
        for p in self.procs.values():
            p.send_signal(signal.SIGHUP)

    def counts(self) -> Dict[str, Dict[str, Any]]:
        """Each relay's last status line (bytes forwarded ``out`` / ``in``)."""
        return {ns: json.loads(p.read_text().splitlines()[-1]) for ns, p in self.status.items()}

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)

    def __enter__(self) -> "Relayed":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def relayed_addresses(relayed: Optional[Relayed], hosts: netns.TwoHosts) -> Dict[str, Any]:
    """What a torchrun launch uses: each host's address, gloo's interface, the rendezvous port."""
    if relayed is None:
        return {"addr": {hosts.ns_a: hosts.addr_a, hosts.ns_b: hosts.addr_b}, "ifname": netns.IFNAME, "port": None}
    return {"addr": dict(relayed.service), "ifname": SERVICE_IF, "port": RDZV_PORT}


def relayed_mpi_env(relayed: Optional[Relayed]) -> Dict[str, str]:
    """What an MPICH launch sets: the ofi netmod over libfabric's tcp provider, on the veth or the relays' interface.

    ``MPICH_CH4_NETMOD=ofi`` and ``FI_PROVIDER=tcp``: MPICH's default (UCX)
    sees both namespaces on one machine and moves the bytes through shared
    memory. ``FI_TCP_IFACE``: the address libfabric's tcp provider listens on
    and publishes to the other ranks -- with the relays, the service address,
    so a rank of the other host connects to a local address of its own
    namespace, where its relay listens. The port comes from the namespace's
    narrowed ephemeral range (libfabric binds port 0), one the peer's relay
    listens on.
    """
    ifname = netns.IFNAME if relayed is None else SERVICE_IF
    return {"MPICH_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": ifname}


__all__: List[str] = [
    "Relayed",
    "relayed_addresses",
    "relayed_mpi_env",
    "SERVICE_IF",
    "PORTS",
    "RDZV_PORT",
    "RELAY_PORT",
]
