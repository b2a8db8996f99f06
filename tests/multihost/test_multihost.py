"""Two hosts x two processes, as a user launches them: ``torchrun`` on each host, ``mpiexec`` across both.

Hosts are network namespaces joined by one veth pair (``tests/reliability/netns.py``;
addresses from 198.18.0.0/15, torn down after every test, also on failure).
Every launch evaluates the reliability campaign's Accuracy case and must equal
one process; then a fault, and every surviving rank must raise within its
bound -- or the launcher must end the job (its documented behaviour, named
in each test). The settings each launch needed are the README's multi-host
recipes:

* torchrun: c10d rendezvous on host a's address with ``--rdzv-conf is_host=1``
  there (its hostname does not resolve to that address), ``--local-addr`` on
  each host (what the others reach it at), ``GLOO_SOCKET_IFNAME`` (gloo would
  pick the interface its hostname resolves to: loopback in a container);
* mpiexec (MPICH's Hydra): ``-hosts a:2,b:2 -iface IF``, the ssh launcher
  (here a script entering b's namespace), and ``MPICH_CH4_NETMOD=ofi
  FI_PROVIDER=tcp FI_TCP_IFACE=IF``: the default UCX netmod sees both hosts on
  one machine and moves the bytes through shared memory, which no network
  fault touches.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

import netns
import pytest
import rank_main
from reliability_harness import Launch, launch_mpi, rank_args, worker_env

from mmeval.testing.ranks import free_port

TIMEOUT = 10.0
#: Seconds over the timeout for a rank to notice, write its result, and for us to read it (a loaded 2-core machine).
SLACK = 10.0
WS = 4
MPI_ENV = {"MPICH_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": netns.IFNAME}


def launch_torchrun(hosts: netns.TwoHosts, out: Path, scenarios: Sequence[str], params: Any = None) -> Launch:
    """``torchrun --nnodes 2 --nproc-per-node 2`` in each namespace, c10d rendezvous at host a."""
    launch = Launch(out, WS)
    port = free_port()
    script = rank_args("torch_cpu", out, scenarios, TIMEOUT, params)[1:]
    try:
        for ns, addr, first in ((hosts.ns_a, hosts.addr_a, True), (hosts.ns_b, hosts.addr_b, False)):
            cmd = [
                *hosts.exec_prefix(ns),
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                "--nproc-per-node=2",
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint={hosts.addr_a}:{port}",
                "--rdzv-id=mmeval-multihost",
                f"--local-addr={addr}",
                *(["--rdzv-conf=is_host=1"] if first else []),
                "--max-restarts=0",
                *script,
            ]
            launch.start(cmd, worker_env({"GLOO_SOCKET_IFNAME": netns.IFNAME}), f"torchrun-{ns}")
    except BaseException:
        launch.close()
        raise
    return launch


def launch_mpiexec(hosts: netns.TwoHosts, out: Path, scenarios: Sequence[str]) -> Launch:
    """Hydra's ``mpiexec`` in host a, two ranks per host, ofi/tcp over the veth."""
    return launch_mpi(
        out,
        WS,
        scenarios,
        timeout=TIMEOUT,
        env=MPI_ENV,
        grace=4,
        launcher_args=[
            "-launcher",
            "ssh",
            "-launcher-exec",
            str(hosts.launcher_exec(out)),
            "-hosts",
            f"{hosts.addr_a}:2,{hosts.addr_b}:2",
            "-iface",
            netns.IFNAME,
            *[a for k, v in MPI_ENV.items() for a in ("-genv", k, v)],
        ],
        prefix=hosts.exec_prefix(hosts.ns_a),
    )


LAUNCHERS = {"torchrun": launch_torchrun, "mpiexec": launch_mpiexec}


def _start(kind: str, hosts: netns.TwoHosts, out: Path, scenarios: Sequence[str], request: Any) -> Launch:
    request.getfixturevalue("torch_available" if kind == "torchrun" else "mpi_available")
    return LAUNCHERS[kind](hosts, out, scenarios)  # type: ignore[operator]


def _hosts_of(launch: Launch, hosts: netns.TwoHosts) -> Dict[int, str]:
    """Each rank's host (``'a'`` / ``'b'``), from its pid; and the namespaces' processes taken for cleanup."""
    ready = launch.wait_event(range(WS), "ready", 120)
    launch.extra_pids = hosts.pids()
    a = set(netns.ip("netns", "pids", hosts.ns_a, check=False).split())
    return {r: "a" if str(e["pid"]) in a else "b" for r, e in ready.items()}


def _equal_to_one_process(launch: Launch) -> None:
    want = rank_main.single_process_accuracy()
    for r, info in launch.results(range(WS), "evaluate", 240).items():
        assert info["got"] == want, f"rank {r}: {info['got']} != {want}"


def _raised_or_ended(
    launch: Launch, ranks: Sequence[int], since: float, bound: float, kind: str, fault: str, figures: Any, where: Any
) -> List[int]:
    """Every rank of ``ranks`` raised within ``bound`` s of ``since``, or the launcher ended it (returns those)."""
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
        if pending and all(p.poll() is not None for p in launch.procs):
            for r in sorted(pending):  # the launcher ended the job before these raised
                figures("multi-host faults", launcher=kind, fault=fault, rank=r, host=where[r], outcome="job ended")
            ended = sorted(pending)
            pending.clear()
        time.sleep(0.05)
    assert not pending, f"ranks {sorted(pending)} neither raised nor were ended within {bound:g}s\n{launch.describe()}"
    return ended


@pytest.mark.parametrize("kind", list(LAUNCHERS))
def test_results_equal_then_a_cut_link(
    kind: str, two_hosts: netns.TwoHosts, scratch: Path, figures: Any, request: Any
) -> None:
    """The result equals one process; then the link goes down (no reset, nobody dies) and every rank raises.

    torchrun: each rank raises (gloo's timeout or a reset), then torchrun ends
    its host's workers. MPICH over ofi/tcp may abort the whole job first
    ("OFI poll failed"): accepted, if it comes within the bound.
    """
    with _start(kind, two_hosts, scratch, ["evaluate", "loop_until_error"], request) as launch:
        where = _hosts_of(launch, two_hosts)
        assert sorted(where.values()) == ["a", "a", "b", "b"], where
        _equal_to_one_process(launch)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        cut_at = time.monotonic()
        two_hosts.cut()
        ended = _raised_or_ended(launch, range(WS), cut_at, TIMEOUT + SLACK, kind, "cut link", figures, where)
        if kind == "torchrun":
            assert not ended, f"ranks {ended} were ended by torchrun before they raised\n{launch.describe()}"


@pytest.mark.parametrize("kind", list(LAUNCHERS))
def test_a_sigkilled_rank_on_the_other_host(
    kind: str, two_hosts: netns.TwoHosts, scratch: Path, figures: Any, request: Any
) -> None:
    """A rank of host b is SIGKILLed mid-loop: the ranks of host a raise (or the launcher ends the job) in time.

    torchrun's agent on b ends b's other worker when the victim dies; the
    ranks on a learn it from gloo (a reset) or at their timeout. Hydra ends the
    whole job at once when one of its ranks dies by a signal.
    """
    with _start(kind, two_hosts, scratch, ["loop_until_error"], request) as launch:
        where = _hosts_of(launch, two_hosts)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        victim = max(r for r, h in where.items() if h == "b")
        killed_at = launch.kill_rank(victim)
        on_a = [r for r, h in where.items() if h == "a"]
        ended = _raised_or_ended(launch, on_a, killed_at, TIMEOUT + SLACK, kind, "SIGKILL on host b", figures, where)
        if kind == "torchrun":
            assert not ended, f"host a's ranks {ended} were ended before they raised\n{launch.describe()}"


def test_latency_and_loss_do_not_change_the_result(
    two_hosts: netns.TwoHosts, scratch: Path, figures: Any, request: Any
) -> None:
    """netem: 50 ms each way and 5 % loss on the link: slow, but the result is exact and in time (TCP retransmits)."""
    import shutil

    if shutil.which("tc") is None:
        pytest.skip("tc (iproute2) is not installed: no netem")
    try:
        two_hosts.netem("delay", "50ms", "loss", "5%")
    except RuntimeError as exc:
        pytest.skip(f"this kernel has no netem: {exc}")
    start = time.monotonic()
    with _start("torchrun", two_hosts, scratch, ["evaluate"], request) as launch:
        _hosts_of(launch, two_hosts)
        _equal_to_one_process(launch)
    figures(
        "multi-host faults",
        launcher="torchrun",
        fault="50 ms + 5 % loss",
        outcome="exact",
        seconds=time.monotonic() - start,
    )
