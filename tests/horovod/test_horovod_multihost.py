"""Two hosts x two processes under ``horovodrun --gloo``, as a user launches it: results, a cut link, a SIGKILL.

The hosts are tests/multihost's network namespaces (``two_hosts``: one veth
pair, addresses from 198.18.0.0/15, torn down after every test). horovodrun
runs in host a and starts host b's ranks through ``ssh`` (it has no other
launcher for remote hosts): here an ``ssh`` early on ``PATH`` that runs the
command in b's namespace (``TwoHosts.launcher_exec``), standing in for
passwordless ssh between real hosts. The settings the launch needed are the
plugin README's recipe:

* ``-H ADDR_A:2,ADDR_B:2``: horovodrun decides which hosts are remote by
  resolving each name and comparing with its own addresses, and hands that name
  to ssh; addresses (or names that resolve, on every host, to the host's
  address on the link) -- a hostname that resolves to 127.0.0.1 makes a remote
  host look local;
* ``--network-interface IF``: without it horovodrun probes every host's
  interfaces through ssh first (its driver/task services); with it the gloo
  rendezvous address is the driver's address on IF and horovodrun sets
  ``HOROVOD_GLOO_IFACE=IF`` for every rank;
* each host's own hostname must resolve, on that host, to its address on the
  link: with ``HOROVOD_GLOO_IFACE`` set, Horovod 0.28.1's gloo still
  advertised the address the hostname resolves to -- 127.0.0.1 on this machine
  (``/etc/hosts``: ``127.0.0.1 vm``), and host a's ranks died in ``hvd.init()``
  with "connect [127.0.0.1]:PORT: Connection refused". Here
  ``/etc/netns/<namespace>/hosts`` (which ``ip netns exec`` mounts over
  ``/etc/hosts``) maps the hostname to each namespace's address
  (:func:`hostname_per_host`, removed afterwards).

The faults, and what is accepted (horovodrun's own behaviour: a non-elastic
gloo job "terminates all workers when any fail", i.e. when one exits non-zero):

* a cut link: nobody dies, so every rank must raise (the backend's timeout)
  within the bound; a rank ended instead is accepted only when horovodrun's
  log says it terminated the workers after a failure;
* a SIGKILLed rank on host b: its exit status is 137, so horovodrun ends the
  job; host a's ranks must raise or be ended by it within the bound.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any, Iterator, List

import netns
import pytest
import rank_main
from launchers import SLACK, TIMEOUT, WS, hosts_of, raised_or_ended
from reliability_harness import Launch, rank_args, worker_env

FLAVOUR = os.environ.get("MMEVAL_HOROVOD_FLAVOUR", "").strip().lower()
HOROVODRUN = shutil.which("horovodrun", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
TERMINATED = "Terminating remaining workers after failure"

pytestmark = pytest.mark.skipif(
    FLAVOUR not in ("torch", "pytorch") or HOROVODRUN is None,
    reason="horovodrun across hosts runs in tox -e horovod-torch (torch_horovod; Horovod built for torch)",
)


@contextlib.contextmanager
def hostname_per_host(hosts: netns.TwoHosts) -> Iterator[None]:
    """This machine's hostname resolves to host a's address in a, b's in b (``/etc/netns/<ns>/hosts``), until exit."""
    made_root = not os.path.isdir("/etc/netns")
    dirs = [Path("/etc/netns") / ns for ns in (hosts.ns_a, hosts.ns_b)]
    try:
        for d, addr in zip(dirs, (hosts.addr_a, hosts.addr_b)):
            d.mkdir(parents=True, exist_ok=True)
            (d / "hosts").write_text(f"127.0.0.1 localhost\n{addr} {socket.gethostname()}\n")
        yield
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        if made_root:
            with contextlib.suppress(OSError):
                os.rmdir("/etc/netns")


def launch_horovodrun(hosts: netns.TwoHosts, out: Path, scenarios: List[str]) -> Launch:
    """``horovodrun --gloo -np 4 -H a:2,b:2 --network-interface IF`` in host a; b's ranks through the ssh stand-in."""
    assert HOROVODRUN is not None
    launch = Launch(out, WS)
    bindir = out / "bin"
    bindir.mkdir()
    (bindir / "ssh").symlink_to(hosts.launcher_exec(out))
    cmd = [
        *hosts.exec_prefix(hosts.ns_a),
        HOROVODRUN,
        "--gloo",
        "-np",
        str(WS),
        "-H",
        f"{hosts.addr_a}:2,{hosts.addr_b}:2",
        "--network-interface",
        netns.IFNAME,
        "--start-timeout",
        "120",
        *rank_args("torch_horovod", out, scenarios, TIMEOUT),
    ]
    env = worker_env()
    env["PATH"] = str(bindir) + os.pathsep + env["PATH"]
    try:
        launch.start(cmd, env, "horovodrun")
    except BaseException:
        launch.close()
        raise
    return launch


def _terminated_by_horovodrun(launch: Launch) -> bool:
    return TERMINATED in (launch.out / "horovodrun.log").read_text(errors="replace")


@pytest.fixture
def hvd_hosts(two_hosts: netns.TwoHosts) -> Iterator[netns.TwoHosts]:
    """tests/multihost's two hosts, each resolving this machine's hostname to its own address."""
    with hostname_per_host(two_hosts):
        yield two_hosts


def test_results_equal_then_a_cut_link(hvd_hosts: netns.TwoHosts, scratch: Path, figures: Any) -> None:
    """Accuracy and AveragePrecision equal one process bit for bit; then the link goes down and every rank raises."""
    two_hosts = hvd_hosts
    with launch_horovodrun(two_hosts, scratch, ["evaluate", "evaluate_ap", "loop_until_error"]) as launch:
        where = hosts_of(launch, two_hosts)
        assert sorted(where.values()) == ["a", "a", "b", "b"], where
        for scenario, want in (
            ("evaluate", rank_main.single_process_accuracy()),
            ("evaluate_ap", rank_main.single_process_average_precision()),
        ):
            for r, info in launch.results(range(WS), scenario, 240).items():
                assert info["got"] == want, f"{scenario}, rank {r}: {info['got']} != {want}"
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        cut_at = time.monotonic()
        two_hosts.cut()
        ended = raised_or_ended(launch, range(WS), cut_at, TIMEOUT + SLACK, "horovodrun", "cut link", figures, where)
        if ended:
            assert _terminated_by_horovodrun(launch), f"ranks {ended} ended without a word\n{launch.describe()}"


def test_a_sigkilled_rank_on_the_other_host(hvd_hosts: netns.TwoHosts, scratch: Path, figures: Any) -> None:
    """A rank of host b is SIGKILLed mid-loop: host a's ranks raise, or horovodrun ends them (it saw exit 137)."""
    two_hosts = hvd_hosts
    with launch_horovodrun(two_hosts, scratch, ["loop_until_error"]) as launch:
        where = hosts_of(launch, two_hosts)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        victim = max(r for r, h in where.items() if h == "b")
        killed_at = launch.kill_rank(victim)
        on_a = [r for r, h in where.items() if h == "a"]
        bound = TIMEOUT + SLACK
        ended = raised_or_ended(launch, on_a, killed_at, bound, "horovodrun", "SIGKILL on host b", figures, where)
        if ended:
            assert _terminated_by_horovodrun(launch), f"ranks {ended} ended without a word\n{launch.describe()}"
