"""The faults netem would make, without netem; a clock behind; the bytes on the wire against comm-stats' counts.

Two hosts x two processes under torchrun, as in ``test_multihost.py``; the
relay's faults under mpiexec too.

* **Latency and loss through a userspace relay** (:mod:`relay`,
  :mod:`relayed_hosts`): this machine's kernel has no netem, so every
  cross-host connection -- the c10d rendezvous, the workers' store and every
  gloo pair -- goes through a relay in each namespace that delays each chunk
  and stalls it as a lost segment would (TCP cannot lose bytes: a loss costs
  a retransmission stall, at least Linux's 200 ms minimum RTO). The result
  equals one process. A stall of every connection longer than the timeout
  (no byte, no reset: the link looks alive) makes every rank raise within
  its bound; a reset of every cross-host connection makes them raise at
  once (or, on host b, torchrun's agent ends a rank: its own store
  connection was reset too). Under mpiexec, libfabric's tcp provider
  listens on the service addresses (:func:`relayed_hosts.relayed_mpi_env`):
  the result is exact too; the stall makes every rank raise in its bound;
  a reset loses the messages in flight without an error, so it is the
  timeout again (then the leave notices, over new connections).
* **A clock behind** (:mod:`clocks`): host b's CLOCK_MONOTONIC (a time
  namespace) and Python's ``time.time()`` set back, the two clocks the
  core's deadlines read. By less than the timeout: the result equals one
  process and a cut link still makes every rank raise within its bound. By
  more than the timeout, the ranks' call windows (each header's start and
  deadline on its host's wall clock) do not overlap, which cannot be told
  from a peer that gave the call up: every rank, on both hosts, refuses the
  call at once, the error naming both windows and the clocks -- the same
  outcome everywhere, but the job cannot evaluate (docs/reliability.md).
* **The bytes on the wire**: the veth's counters around one AveragePrecision
  ``compute()`` against what the comm-stats hook counted on every rank, under
  torchrun (through the relays) and under mpiexec (over the bare veth).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict

import clocks
import netns
import pytest
from launchers import (
    LAUNCHERS,
    SLACK,
    WS,
    equal_to_one_process,
    hosts_of,
    launch_mpiexec,
    launch_torchrun,
    raised_or_ended,
    start_launch,
)
from relayed_hosts import Relayed

#: The link's bytes against comm-stats' bytes from the other host: at least 95 % (gloo's ring moves the 4 KiB slots of
#: an all-gather past a neighbour, so 6 of the 8 slot copies a rank counts as received from the other host cross),
#: at most 110 % plus 64 KiB (TCP/IP and Ethernet headers, ACKs, gloo's framing, the barrier after compute()).
#: The same bounds under mpiexec: MPICH's recursive-doubling all-gather crosses exactly the counted share of the
#: slots, the gather's payload goes point to point, and ofi/tcp's headers, Hydra's traffic and the barriers add
#: 1.3 - 1.9 % (docs/reliability.md).
LOWER, UPPER, SLACK_BYTES = 0.95, 1.10, 64 << 10

#: Every launch's collective timeout here (test_multihost.py's 10 s, halved: the env's run time).
TIMEOUT = 5.0

#: The relay's latency each way, and its loss model: 5 % of chunks stall 200 ms (a retransmission).
DELAY_MS, STALL_PROB, STALL_MS = 20.0, 0.05, 200.0


@pytest.fixture
def relayed(two_hosts: netns.TwoHosts, scratch: Path) -> Any:
    with Relayed(two_hosts, scratch, DELAY_MS, STALL_PROB, STALL_MS) as relays:
        yield relays


@pytest.mark.parametrize("kind", list(LAUNCHERS))
def test_latency_and_loss_through_the_relay_then_a_stall_longer_than_the_timeout(
    kind: str, two_hosts: netns.TwoHosts, relayed: Relayed, scratch: Path, figures: Any, request: Any
) -> None:
    """20 ms each way, 5 % of chunks stalled 200 ms: the result is exact; then nothing moves: every rank raises.

    The stall keeps every socket open and sends no reset (a link that looks
    alive and carries nothing): each rank can only learn it at its timeout --
    or, under mpiexec, from a rank of its own host that timed out first and
    told its peers (mpi4py's leave notice, through shared memory).
    """
    start = time.monotonic()
    scenarios = ["evaluate", "loop_until_error"]
    with start_launch(
        kind, two_hosts, scratch, scenarios, request, params={"looping_after": 5}, relayed=relayed, timeout=TIMEOUT
    ) as launch:
        where = hosts_of(launch, two_hosts)
        assert sorted(where.values()) == ["a", "a", "b", "b"], where
        equal_to_one_process(launch)
        figures(
            "multi-host faults",
            launcher=kind,
            fault=f"relay: {DELAY_MS:g} ms each way, {STALL_PROB:.0%} of chunks stalled {STALL_MS:g} ms",
            outcome="exact",
            seconds=time.monotonic() - start,
        )
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.6)  # a relay writes its counts every 0.5 s
        counts = relayed.counts()
        # the ranks reached the other host only through the relays: both carried traffic both ways
        for ns, c in counts.items():
            assert c["out"] > 0 and c["in"] > 0, f"the relay of {ns} carried nothing: {counts}"
        time.sleep(0.5)
        stalled_at = time.monotonic()
        relayed.stall()
        ended = raised_or_ended(
            launch, range(WS), stalled_at, TIMEOUT + SLACK, kind, "relay stalls everything", figures, where
        )
        assert not ended, f"ranks {ended} were ended by {kind} before they raised\n{launch.describe()}"
        _timed_out_or_told(launch)


def _timed_out_or_told(launch: Any) -> None:
    """Some rank timed out; each of the others did too, or raised because a peer told it that it had left.

    A stall sends nothing: no rank may see a reset or a closed connection.
    A rank whose peer timed out first may learn it from that peer (its
    leave notice, over a connection of their own host) before its own timeout.
    """
    errors = {r: launch.find(r, "result", scenario="loop_until_error")["info"]["error"] for r in range(WS)}
    timed_out = [r for r, err in errors.items() if err["type"] == "CollectiveTimeoutError"]
    assert timed_out, f"no rank timed out: {errors}"
    for r, err in errors.items():
        told = err["type"] == "CollectiveFailedError" and " left after completing " in err["message"]
        assert r in timed_out or told, f"rank {r}: {err}"


def _set_back_on_b(launch: Any, where: Dict[int, str], shifted: Dict[str, int]) -> None:
    """Host b's ranks run with their clocks set back (a time namespace, the variable), host a's do not."""
    for r, host in where.items():
        pid = int(launch.find(r, "ready")["pid"])
        offsets = Path(f"/proc/{pid}/timens_offsets").read_text().split()
        monotonic = int(offsets[offsets.index("monotonic") + 1])
        variables = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        realtime = b"TEST_REALTIME_BACK_S=%d" % shifted["realtime"] in variables
        want = (-shifted["monotonic"], True) if host == "b" else (0, False)
        assert (monotonic, realtime) == want, f"rank {r} on host {host}: {offsets}, realtime back: {realtime}"


def _clock_behind(realtime_s: int) -> Dict[str, Any]:
    why = clocks.time_namespace_unavailable()
    if why is not None:
        pytest.skip(why)
    prefix, env, shifted = clocks.set_back(realtime_s, clocks.monotonic_back(120))
    return {"wrap_b": prefix, "env_b": env, "shifted": shifted}


@pytest.mark.parametrize("kind", list(LAUNCHERS))
def test_a_clock_behind_by_less_than_the_timeout(
    kind: str, two_hosts: netns.TwoHosts, scratch: Path, figures: Any, request: Any
) -> None:
    """Host b's clocks 2 s (realtime) and up to 120 s (monotonic) behind: exact result; a cut link still raises.

    mpiexec: MPICH over ofi/tcp may abort the job first, as in
    ``test_multihost.py``'s cut link: accepted within the bound.
    """
    clock = _clock_behind(2)
    with start_launch(
        kind,
        two_hosts,
        scratch,
        ["evaluate", "loop_until_error"],
        request,
        wrap_b=clock["wrap_b"],
        env_b=clock["env_b"],
        timeout=TIMEOUT,
    ) as launch:
        where = hosts_of(launch, two_hosts)
        _set_back_on_b(launch, where, clock["shifted"])
        equal_to_one_process(launch)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        cut_at = time.monotonic()
        two_hosts.cut()
        fault = "cut link, host b's clock behind ({realtime} s realtime, {monotonic} s monotonic)".format(
            **clock["shifted"]
        )
        ended = raised_or_ended(launch, range(WS), cut_at, TIMEOUT + SLACK, kind, fault, figures, where)
        if kind == "torchrun":
            assert not ended, f"ranks {ended} were ended by torchrun before they raised\n{launch.describe()}"


@pytest.mark.parametrize("kind", list(LAUNCHERS))
def test_a_clock_behind_by_more_than_the_timeout(
    kind: str, two_hosts: netns.TwoHosts, scratch: Path, figures: Any, request: Any
) -> None:
    """Host b's wall clock 3 timeouts behind: every rank, on both hosts, refuses the call in time naming the clocks."""
    behind = int(3 * TIMEOUT)
    clock = _clock_behind(behind)
    with start_launch(
        kind, two_hosts, scratch, ["evaluate"], request, wrap_b=clock["wrap_b"], env_b=clock["env_b"], timeout=TIMEOUT
    ) as launch:
        where = hosts_of(launch, two_hosts)
        _set_back_on_b(launch, where, clock["shifted"])
        found = launch.wait_event(range(WS), "result", TIMEOUT + SLACK + 60, scenario="evaluate")
    for r, e in sorted(found.items()):
        failures = "\n".join(e["info"].get("failures", []))
        ready = launch.find(r, "ready")
        assert ready is not None
        since_ready = e["t"] - ready["t"]
        figures(
            "multi-host faults",
            launcher=kind,
            fault=f"host b's realtime clock {behind} s behind",
            rank=r,
            host=where[r],
            outcome="exact" if e["ok"] else failures.strip().splitlines()[-1][:120],
            seconds_after_ready=since_ready,
        )
        assert since_ready <= TIMEOUT + SLACK, f"rank {r} took {since_ready:.1f}s after joining the group"
        assert not e["ok"], f"rank {r} (host {where[r]}) completed a call its peers refused: {e}"
        last = failures.strip().splitlines()[-1]
        assert "CollectiveFailedError" in last and "clock" in last, (
            f"rank {r}'s error does not name the clocks:\n{failures}"
        )


def test_the_bytes_on_the_wire_then_a_reset_of_every_connection(
    two_hosts: netns.TwoHosts, relayed: Relayed, scratch: Path, figures: Any, torch_available: None
) -> None:
    """The veth's bytes during one compute() against comm-stats' counts, within :data:`LOWER` .. :data:`UPPER`.

    comm-stats counts, per rank, the bytes each collective delivered to it
    from its peers (``bytes_received``; headers and framing excluded). Of
    each rank's 3 peers, 2 are on the other host, so 2/3 of the world's count
    crossed the link. This compute() (AveragePrecision, per-sample scores) is
    one slot all-gather, one gather of the scores to rank 0 (point to point:
    each block crosses once or not at all) and one broadcast of the result.
    ``bytes_sent`` is not the measure: a slot exchange counts what a rank
    sent once, a payload all-gather ``ws - 1`` times (the core's convention,
    pinned by tests/core/transport/test_reductions.py), so the world's sent and
    received differ. Through the relays (which add 2 bytes per connection).

    Then the relays reset every connection (a middlebox's RST, both ways):
    every rank raises at once -- or, on host b, is ended by its torchrun
    agent, whose own connection to the rendezvous store was reset too.
    """
    params = {"ifname": netns.IFNAME, "wire_samples": 60_000, "looping_after": 5}
    scenarios = ["wire_bytes", "loop_until_error"]
    with launch_torchrun(two_hosts, scratch, scenarios, params=params, relayed=relayed, timeout=TIMEOUT) as launch:
        where = hosts_of(launch, two_hosts)
        infos = launch.results(range(WS), "wire_bytes", 240)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        reset_at = time.monotonic()
        relayed.reset()
        fault = "relay resets everything"
        ended = raised_or_ended(launch, range(WS), reset_at, TIMEOUT + SLACK, "torchrun", fault, figures, where)
        assert all(where[r] == "b" for r in ended), f"host a's ranks {ended} were ended\n{launch.describe()}"
    _check_wire_bytes("torchrun", infos, where, figures)


def test_the_bytes_on_the_wire_under_mpiexec(
    two_hosts: netns.TwoHosts, scratch: Path, figures: Any, mpi_available: None
) -> None:
    """The same compute() under mpiexec (mpi4py over MPICH's ofi/tcp on the veth), within :data:`LOWER` .. :data:`UPPER`.

    No relays: the ranks' connections and Hydra's own (mpiexec to host b's
    proxy, which forwards b's output) share the veth, as in a user's launch.
    """
    params = {"ifname": netns.IFNAME, "wire_samples": 60_000}
    with launch_mpiexec(two_hosts, scratch, ["wire_bytes"], params=params, timeout=TIMEOUT) as launch:
        where = hosts_of(launch, two_hosts)
        infos = launch.results(range(WS), "wire_bytes", 240)
    _check_wire_bytes("mpiexec", infos, where, figures)


def _check_wire_bytes(launcher: str, infos: Dict[int, Dict[str, Any]], where: Dict[int, str], figures: Any) -> None:
    """The veth's bytes (seen from host a) against the bytes comm-stats counted from the other host, in bounds."""
    on_a = min(r for r, h in where.items() if h == "a")
    link = infos[on_a]["link_bytes"]
    received = sum(i["received"] for i in infos.values())
    # what arrived at each rank came from its 3 peers, 2 of them on the other host
    crossing = received * 2 // (WS - 1)
    figures(
        "multi-host wire bytes",
        launcher=launcher,
        compute="AveragePrecision, 60000 x 10 float32 scores",
        comm_stats_received=received,
        comm_stats_sent=sum(i["sent"] for i in infos.values()),
        calls=infos[on_a]["calls"],
        from_the_other_host=crossing,
        link_bytes=link,
        ratio=link / crossing,
    )
    print(f"{launcher}: link {link} bytes, comm-stats {crossing} from the other host: {link / crossing:.3f}")
    lower, upper = int(crossing * LOWER), int(crossing * UPPER) + SLACK_BYTES
    assert lower <= link <= upper, (
        f"{launcher}: the link carried {link} bytes; comm-stats counted {received} received, {crossing} of them from "
        f"the other host (expected {lower}..{upper})\n{infos}"
    )


def test_a_reset_of_every_connection_under_mpiexec(
    two_hosts: netns.TwoHosts, relayed: Relayed, scratch: Path, figures: Any, mpi_available: None
) -> None:
    """Through the relays under mpiexec (exact first), then they reset every connection: each rank raises or is ended.

    libfabric's tcp provider sees ``ECONNRESET`` on every cross-host
    connection. What follows is MPICH's: an error returned to the waiting
    ``MPI_Test`` (``CollectiveFailedError``), or Hydra ending the job when a
    rank aborts -- either within the bound (docs/reliability.md).
    """
    scenarios = ["evaluate", "loop_until_error"]
    params = {"looping_after": 5}
    with launch_mpiexec(two_hosts, scratch, scenarios, params=params, relayed=relayed, timeout=TIMEOUT) as launch:
        where = hosts_of(launch, two_hosts)
        equal_to_one_process(launch)
        launch.wait_event(range(WS), "looping", 120)
        time.sleep(0.5)
        reset_at = time.monotonic()
        relayed.reset()
        raised_or_ended(
            launch, range(WS), reset_at, TIMEOUT + SLACK, "mpiexec", "relay resets everything", figures, where
        )
