"""The launches of the multi-host tests: ``torchrun`` on each host, ``mpiexec`` across both, and their checks.

The settings each launch needs are the README's multi-host recipes (see
``test_multihost.py``). :func:`launch_torchrun` also runs through the relays
of :mod:`relayed_hosts` (every cross-host connection delayed or stalled), and
so does :func:`launch_mpiexec`; both can wrap host b's commands (a clock set
back, :mod:`clocks`).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import netns
import rank_main
from relayed_hosts import Relayed, relayed_addresses, relayed_mpi_env
from reliability_harness import Launch, launch_mpi, rank_args, worker_env

from mmeval.testing.ranks import free_port

TIMEOUT = 10.0
#: Seconds over the timeout for a rank to notice, write its result, and for us to read it (a loaded 2-core machine).
SLACK = 10.0
WS = 4


def launch_torchrun(
    hosts: netns.TwoHosts,
    out: Path,
    scenarios: Sequence[str],
    params: Any = None,
    relayed: Optional[Relayed] = None,
    wrap_b: Sequence[str] = (),
    env_b: Optional[Dict[str, str]] = None,
    timeout: float = TIMEOUT,
) -> Launch:
    """``torchrun --nnodes 2 --nproc-per-node 2`` in each namespace, c10d rendezvous at host a.

    ``relayed``: the ranks use the relays' service addresses, so every
    cross-host connection goes through them. ``wrap_b`` / ``env_b``: a command
    prefix and variables for host b's torchrun (its clock set back).
    """
    launch = Launch(out, WS)
    net = relayed_addresses(relayed, hosts)
    addr = net["addr"]
    port = net["port"] or free_port()
    script = rank_args("torch_cpu", out, scenarios, timeout, params)[1:]
    try:
        for ns, first in ((hosts.ns_a, True), (hosts.ns_b, False)):
            cmd = [
                *hosts.exec_prefix(ns),
                *([] if first else wrap_b),
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                "--nproc-per-node=2",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint={addr[hosts.ns_a]}:{port}",
                "--rdzv-id=mmeval-multihost",
                f"--local-addr={addr[ns]}",
                *(["--rdzv-conf=is_host=1"] if first else []),
                "--max-restarts=0",
                *script,
            ]
            env = worker_env({"GLOO_SOCKET_IFNAME": net["ifname"], **({} if first else env_b or {})})
            launch.start(cmd, env, f"torchrun-{ns}")
    except BaseException:
        launch.close()
        raise
    return launch


def launch_mpiexec(
    hosts: netns.TwoHosts,
    out: Path,
    scenarios: Sequence[str],
    params: Any = None,
    relayed: Optional[Relayed] = None,
    wrap_b: Sequence[str] = (),
    env_b: Optional[Dict[str, str]] = None,
    timeout: float = TIMEOUT,
) -> Launch:
    """Hydra's ``mpiexec`` in host a, two ranks per host, ofi/tcp over the veth.

    ``relayed``: libfabric's tcp provider listens on each host's service
    address (``FI_TCP_IFACE`` names the relays' interface), so every
    connection between ranks of different hosts goes through the relays;
    Hydra's own connections (mpiexec to the proxy on b, ``-iface``) stay on
    the veth, so that a fault of the relays is one of MPI's links only.
    ``wrap_b`` / ``env_b``: a command prefix and variables for host b's
    Hydra proxy, whose ranks inherit both (:func:`_launcher_for_b`).
    """
    env = relayed_mpi_env(relayed)
    launcher = hosts.launcher_exec(out)
    if wrap_b or env_b:
        launcher, to_all = _launcher_for_b(hosts, launcher, wrap_b, env_b or {})
        env = {**env, **to_all}
    return launch_mpi(
        out,
        WS,
        scenarios,
        timeout=timeout,
        params=params,
        env=env,
        grace=4,
        launcher_args=[
            "-launcher",
            "ssh",
            "-launcher-exec",
            str(launcher),
            "-hosts",
            f"{hosts.addr_a}:2,{hosts.addr_b}:2",
            "-iface",
            netns.IFNAME,
            *[a for k, v in env.items() for a in ("-genv", k, v)],
        ],
        prefix=hosts.exec_prefix(hosts.ns_a),
    )


def _launcher_for_b(
    hosts: netns.TwoHosts, launcher: Path, wrap_b: Sequence[str], env_b: Dict[str, str]
) -> Tuple[Path, Dict[str, str]]:
    """An ``ssh`` stand-in that starts host b's proxy under ``wrap_b`` with ``env_b``; and what every rank must get.

    Hydra sets each variable of mpiexec's environment on every rank, over
    what the proxy had: a variable mpiexec's environment holds (``PYTHONPATH``
    may) would not keep host b's value, so it goes to every rank instead
    (for the clocks, harmless: the ``sitecustomize`` does nothing without
    ``TEST_REALTIME_BACK_S``). The others reach host b's ranks only.
    """
    outer = worker_env()
    to_all = {k: v for k, v in env_b.items() if k in outer}
    only_b = " ".join(shlex.quote(f"{k}={v}") for k, v in env_b.items() if k not in outer)
    script = launcher.with_name("netns-ssh-b.sh")
    script.write_text(
        "#!/bin/sh\n"
        "# host b's proxy (and with it its ranks) under a prefix and with variables of its own\n"
        'for arg in "$@"; do\n'
        f'  [ "$arg" = {hosts.addr_b} ] && exec env {only_b} {shlex.join(wrap_b)} {shlex.quote(str(launcher))} "$@"\n'
        "done\n"
        f'exec {shlex.quote(str(launcher))} "$@"\n'
    )
    script.chmod(0o755)
    return script, to_all


LAUNCHERS = {"torchrun": launch_torchrun, "mpiexec": launch_mpiexec}


def start_launch(
    kind: str, hosts: netns.TwoHosts, out: Path, scenarios: Sequence[str], request: Any, **options: Any
) -> Launch:
    """A launch of ``kind`` (a key of :data:`LAUNCHERS`; skipped, saying why, without its framework)."""
    request.getfixturevalue("torch_available" if kind == "torchrun" else "mpi_available")
    return LAUNCHERS[kind](hosts, out, scenarios, **options)  # type: ignore[operator]


def hosts_of(launch: Launch, hosts: netns.TwoHosts) -> Dict[int, str]:
    """Each rank's host (``'a'`` / ``'b'``), from its pid; and the namespaces' processes taken for cleanup."""
    ready = launch.wait_event(range(WS), "ready", 120)
    launch.extra_pids = hosts.pids()
    a = set(netns.ip("netns", "pids", hosts.ns_a, check=False).split())
    return {r: "a" if str(e["pid"]) in a else "b" for r, e in ready.items()}


def equal_to_one_process(launch: Launch) -> None:
    want = rank_main.single_process_accuracy()
    for r, info in launch.results(range(WS), "evaluate", 240).items():
        assert info["got"] == want, f"rank {r}: {info['got']} != {want}"


def _alive(launch: Launch, rank: int) -> bool:
    ready = launch.find(rank, "ready")
    if ready is None:
        return True
    try:
        with open(f"/proc/{int(ready['pid'])}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def raised_or_ended(
    launch: Launch, ranks: Sequence[int], since: float, bound: float, kind: str, fault: str, figures: Any, where: Any
) -> List[int]:
    """Every rank of ``ranks`` raised within ``bound`` s of ``since``, or the launcher ended it (returns those).

    Ended: every process of the launch exited, or that rank's own process is
    gone without a result (its host's agent ended it).
    """
    deadline = since + bound
    ended: List[int] = []
    pending = set(ranks)
    while pending and time.monotonic() < deadline:
        for r in sorted(pending):
            e = launch.find(r, "result", scenario="loop_until_error")
            if e is not None:
                err = e["info"]["error"]
                assert err is not None and err["type"].endswith("Error"), e
                figures(
                    "multi-host faults",
                    launcher=kind,
                    fault=fault,
                    rank=r,
                    host=where[r],
                    outcome=err["type"],
                    seconds=err["raised_at"] - since,
                )
                pending.discard(r)
        everything_exited = all(p.poll() is not None for p in launch.procs)
        for r in sorted(pending):
            if everything_exited or not _alive(launch, r):
                if launch.find(r, "result", scenario="loop_until_error") is not None:
                    continue  # it wrote its result and exited meanwhile: read on the next round
                what = "job ended" if everything_exited else "ended by its launcher"
                figures("multi-host faults", launcher=kind, fault=fault, rank=r, host=where[r], outcome=what)
                ended.append(r)
                pending.discard(r)
        time.sleep(0.05)
    assert not pending, f"ranks {sorted(pending)} neither raised nor were ended within {bound:g}s\n{launch.describe()}"
    return sorted(ended)
