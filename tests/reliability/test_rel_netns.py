"""Several hosts on one machine: ranks in two network namespaces, then the link between them is cut.

Host a runs ranks 0 and 1, host b rank 2; they talk over the veth pair only
(gloo bound to it with GLOO_SOCKET_IFNAME; MPI's ofi/tcp netmod bound to it
with FI_TCP_IFACE). The evaluation must equal the single-process result;
then, while every rank loops over 256 KiB all-gathers, the link goes down
(``ip link set ... down``: packets are dropped, no TCP reset, nobody dies)
and every rank -- none of them dead -- must raise within the collective
timeout, naming the operation.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict

import netns
import pytest
import rank_main
from reliability_harness import Launch, launch_mpi, launch_torch

TIMEOUT = 10.0
#: Seconds over the timeout for a rank to notice, write its result and for us to read it (a loaded 2-core machine).
SLACK = 8.0
WS = 3


def _check_cut(launch: Launch, cut_at: float, kind: str, figures: Any, label: str) -> Dict[int, Dict[str, Any]]:
    infos = launch.results(range(WS), "loop_until_error", TIMEOUT + 60)
    for r, info in infos.items():
        err = info["error"]
        assert err is not None, info
        assert err["type"] in ("CollectiveTimeoutError", "CollectiveFailedError"), err
        assert "all_gather_object" in err["message"] and kind in err["message"], err["message"]
        surfaced = err["raised_at"] - cut_at
        assert surfaced < TIMEOUT + SLACK, f"rank {r} raised {surfaced:.1f}s after the cut (timeout {TIMEOUT:g}s)"
        figures(
            "link cut (two namespaces)",
            backend=label,
            rank=r,
            host="a" if r < 2 else "b",
            error=err["type"],
            seconds_after_cut=surfaced,
            collectives_before=info["iterations"],
        )
    return infos


@pytest.mark.usefixtures("torch_available")
def test_torch_cpu_across_namespaces(two_hosts: netns.TwoHosts, scratch: Path, figures: Any) -> None:
    """gloo over TCP between two namespaces: right metric, then a cut link makes every rank raise in time.

    And the processes then exit at once: gloo's worker threads are still
    blocked in a read on the cut connection, and destroying the process group
    (explicitly or at interpreter exit) would wait for them until the process
    group's own timeout (30 minutes by default; 300 s here).
    """
    prefixes = [two_hosts.exec_prefix(two_hosts.ns_a)] * 2 + [two_hosts.exec_prefix(two_hosts.ns_b)]
    launch = launch_torch(
        scratch,
        WS,
        ["evaluate", "loop_until_error"],
        timeout=TIMEOUT,
        prefix=prefixes,
        addr=two_hosts.addr_a,
        ifname=netns.IFNAME,
    )
    with launch:
        launch.extra_pids = two_hosts.pids()
        want = rank_main.single_process_accuracy()
        for r, info in launch.results(range(WS), "evaluate", 180).items():
            assert info["got"] == want, f"rank {r}: {info['got']} != {want}"
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        cut_at = time.monotonic()
        two_hosts.cut()
        _check_cut(launch, cut_at, "torch_cpu", figures, "torch_cpu")
        done = launch.wait_event(range(WS), "done", 30)
        for r, proc in enumerate(launch.procs):
            try:
                proc.wait(timeout=30)
            except Exception:
                pytest.fail(
                    f"rank {r} raised, but its process had not exited 30 s after (a gloo thread joined at exit?)"
                )
            figures(
                "link cut (two namespaces)", backend="torch_cpu", rank=r, process_exit_s=time.monotonic() - done[r]["t"]
            )


@pytest.mark.usefixtures("mpi_available")
def test_mpi_across_namespaces(two_hosts: netns.TwoHosts, scratch: Path, figures: Any) -> None:
    """MPI across the namespaces: Hydra's ``mpiexec`` runs in host a and reaches host b through its ssh launcher.

    ``-launcher ssh -launcher-exec SCRIPT`` makes Hydra start host b's proxy
    with ``SCRIPT -x 198.18.X.2 'hydra_pmi_proxy ...'``; the script runs that in
    b's namespace (``ip netns exec``). ``-iface`` makes the proxies call back
    over the veth. The ranks use MPICH's ofi netmod with libfabric's tcp
    provider on the veth: the default UCX netmod finds the peer "on the same
    machine" and moves the bytes through shared memory, which no link cut
    affects (UCX's tcp transport also refuses the veth as a device).
    """
    launcher = two_hosts.launcher_exec(scratch)
    env = {"MPICH_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": netns.IFNAME}
    hosts = f"{two_hosts.addr_a}:2,{two_hosts.addr_b}:1"
    launch = launch_mpi(
        scratch,
        WS,
        ["evaluate", "loop_until_error"],
        timeout=TIMEOUT,
        env=env,
        grace=4,
        launcher_args=[
            "-launcher",
            "ssh",
            "-launcher-exec",
            str(launcher),
            "-hosts",
            hosts,
            "-iface",
            netns.IFNAME,
            "-disable-auto-cleanup",
            *[a for k, v in env.items() for a in ("-genv", k, v)],
        ],
        prefix=two_hosts.exec_prefix(two_hosts.ns_a),
    )
    with launch:
        want = rank_main.single_process_accuracy()
        infos = launch.results(range(WS), "evaluate", 180)
        for r, info in infos.items():
            assert info["got"] == want, f"rank {r}: {info['got']} != {want}"
        ready = launch.wait_event(range(WS), "ready", 10)
        launch.extra_pids = two_hosts.pids()
        in_b = set(launch.extra_pids)
        # where each rank runs: ranks 0 and 1 in host a, rank 2 in host b
        ns_of = {r: _netns_of(int(e["pid"]), two_hosts) for r, e in ready.items()}
        assert ns_of == {0: two_hosts.ns_a, 1: two_hosts.ns_a, 2: two_hosts.ns_b}, (ns_of, in_b)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        cut_at = time.monotonic()
        two_hosts.cut()
        _check_cut(launch, cut_at, "mpi4py", figures, "mpi4py")


def _netns_of(pid: int, hosts: netns.TwoHosts) -> str:
    for ns in (hosts.ns_a, hosts.ns_b):
        if str(pid) in netns.ip("netns", "pids", ns, check=False).split():
            return ns
    return "?"
