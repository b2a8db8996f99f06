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

import time
from pathlib import Path
from typing import Any

import netns
import pytest
from launchers import LAUNCHERS, SLACK, TIMEOUT, WS, equal_to_one_process, hosts_of, raised_or_ended, start_launch


@pytest.mark.parametrize("kind", list(LAUNCHERS))
def test_results_equal_then_a_cut_link(
    kind: str, two_hosts: netns.TwoHosts, scratch: Path, figures: Any, request: Any
) -> None:
    """The result equals one process; then the link goes down (no reset, nobody dies) and every rank raises.

    torchrun: each rank raises (gloo's timeout or a reset), then torchrun ends
    its host's workers. MPICH over ofi/tcp may abort the whole job first
    ("OFI poll failed"): accepted, if it comes within the bound.
    """
    with start_launch(kind, two_hosts, scratch, ["evaluate", "loop_until_error"], request) as launch:
        where = hosts_of(launch, two_hosts)
        assert sorted(where.values()) == ["a", "a", "b", "b"], where
        equal_to_one_process(launch)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        cut_at = time.monotonic()
        two_hosts.cut()
        ended = raised_or_ended(launch, range(WS), cut_at, TIMEOUT + SLACK, kind, "cut link", figures, where)
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
    with start_launch(kind, two_hosts, scratch, ["loop_until_error"], request) as launch:
        where = hosts_of(launch, two_hosts)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        victim = max(r for r, h in where.items() if h == "b")
        killed_at = launch.kill_rank(victim)
        on_a = [r for r, h in where.items() if h == "a"]
        ended = raised_or_ended(launch, on_a, killed_at, TIMEOUT + SLACK, kind, "SIGKILL on host b", figures, where)
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
    with start_launch("torchrun", two_hosts, scratch, ["evaluate"], request) as launch:
        hosts_of(launch, two_hosts)
        equal_to_one_process(launch)
    figures(
        "multi-host faults",
        launcher="torchrun",
        fault="50 ms + 5 % loss",
        outcome="exact",
        seconds=time.monotonic() - start,
    )
