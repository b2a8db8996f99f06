"""The core's half of the transport contract: timeouts validated once, the question, poisoning state."""

from __future__ import annotations

import math
import threading

import pytest
from hub_backend import HubDist, run_ranks

from mmeval.core.dist_backends.framed_backend import FramedDistBackend, _resolve_timeout
from mmeval.core.errors import CollectiveMismatchError


class _Capped(HubDist):
    max_timeout = 1e9


@pytest.mark.parametrize(
    "raw,ok",
    [
        ("inf", True),
        ("1e308", True),
        ("1e10", True),
        ("0.001", True),
        ("5", True),
        ("0.0005", False),
        ("0", False),
        ("-3", False),
        ("nan", False),
        ("soon", False),
    ],
)
def test_timeouts_are_validated_at_construction_naming_the_variable(monkeypatch, raw, ok):
    monkeypatch.setenv("MMEVAL_TIMEOUT", raw)
    if ok:
        value = HubDist(0, 1, ("127.0.0.1", 0)).timeout
        assert value == float(raw) and (math.isinf(value) or value >= 0.001)
    else:
        with pytest.raises(ValueError, match="MMEVAL_TIMEOUT"):
            HubDist(0, 1, ("127.0.0.1", 0))


@pytest.mark.parametrize("raw", ["inf", "1e308", "1e10"])
def test_a_transport_with_a_limit_refuses_more_and_refuses_no_limit(monkeypatch, raw):
    monkeypatch.setenv("MMEVAL_HUB_TIMEOUT", raw)
    with pytest.raises(ValueError, match="MMEVAL_HUB_TIMEOUT") as info:
        _Capped(0, 1, ("127.0.0.1", 0))
    assert ("without a limit" in str(info.value)) == (raw == "inf")


def test_the_argument_wins_and_is_validated_too():
    assert _resolve_timeout("x", 2.5, math.inf) == 2.5
    with pytest.raises(ValueError, match="timeout="):
        _resolve_timeout("x", 1e-4, math.inf)
    assert FramedDistBackend.max_timeout == math.inf


def _ask_from_threads(backend, names):
    out = {}

    def run():
        try:
            out["value"] = backend.all_gather_object(backend.rank)
        except CollectiveMismatchError as exc:
            out["error"] = str(exc)

    t = threading.Thread(target=run, name=names[backend.rank])
    t.start()
    t.join()
    return out


def test_matching_calls_from_differently_named_threads_are_refused_on_every_rank():
    res = run_ranks(_ask_from_threads, 2, ["evaluator", "other-thread"], timeout=60)
    for status, value in res.values():
        assert status == "ok", value
        assert "thread" in value["error"] and "evaluator" in value["error"] and "other-thread" in value["error"]
    same = run_ranks(_ask_from_threads, 2, ["evaluator", "evaluator"], timeout=60)
    assert all(v == ("ok", {"value": [0, 1]}) for v in same.values())


def _compute_with(backend, topk_by_rank, size_by_rank):
    import numpy as np

    from mmeval import Accuracy

    acc = Accuracy(topk=topk_by_rank[backend.rank], dist_backend=backend)
    acc.add(np.eye(4)[[0, 1, 2]], [0, 1, 3])
    try:
        return {"result": acc.compute(size=size_by_rank[backend.rank])}
    except CollectiveMismatchError as exc:
        return {"error": str(exc)}


@pytest.mark.parametrize(
    "topk,size,field", [([(1,), (1, 2), (1,)], [6, 6, 6], "topk"), ([(1,), (1,), (1,)], [6, 5, 6], "size")]
)
def test_compute_with_a_different_question_raises_on_every_rank_naming_the_field(topk, size, field):
    res = run_ranks(_compute_with, 3, topk, size, timeout=60)
    for status, value in res.values():
        assert status == "ok", value
        assert "error" in value, value
        assert f"{field}:" in value["error"] and "rank 1=" in value["error"], value["error"]


def _local_error_in_payload(backend, exc_type, message):
    from mmeval.core.errors import CollectiveFailedError

    def boom(call):
        raise exc_type(message)

    backend._all_gather_bytes = boom  # a local failure of this rank's transport step (not a lost peer)
    try:
        backend.all_gather_object(b"x" * 10_000)  # not inline: the payload stage runs
    except CollectiveFailedError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "exc_type,message,peer",
    [
        (MemoryError, "cannot allocate 2**64 bytes", False),
        (OverflowError, "timeout too large", False),
        (RuntimeError, "Connection closed by peer [127.0.0.1]:1234", True),
    ],
)
def test_a_peer_is_said_to_have_died_only_when_the_transport_says_so(exc_type, message, peer):
    res = run_ranks(_local_error_in_payload, 2, exc_type, message, timeout=60)
    for status, text in res.values():
        assert status == "ok" and text, text
        assert message in text and exc_type.__name__ in text
        assert ("peer rank has probably died" in text) is peer, text


def _recycled_groups(backend, rounds):
    """Poison one group, drop it, then build new groups: none may inherit the old one's fate or sequence."""
    import gc

    from hub_backend import free_port

    from mmeval.core.errors import CollectiveTimeoutError

    seen = []
    for r in range(rounds):
        port = backend.broadcast_object(free_port() if backend.rank == 0 else None, src=0)
        group = HubDist(backend.rank, backend.world_size, ("127.0.0.1", port), timeout=0.5)
        seen.append(id(group))
        if r == 0:
            if backend.rank == 0:  # rank 1 never calls: rank 0 times out and its group is poisoned
                with pytest.raises(CollectiveTimeoutError):
                    group.all_gather_object("lonely")
                assert group.poisoned
        else:
            assert group.poisoned is None, f"round {r}: a new group was born poisoned: {group.poisoned}"
            assert group.all_gather_object(r) == [r] * backend.world_size
        backend.barrier()
        del group
        gc.collect()
    return len(set(seen)) < len(seen)  # whether an address was reused (the case the test is about)


def test_a_new_group_never_inherits_a_dropped_groups_poison():
    # CPython reuses a freed object's address; state keyed by id() was inherited by the next group there
    res = run_ranks(_recycled_groups, 2, 6, timeout=120)
    for status, value in res.values():
        assert status == "ok", value


def _refusal_after_a_local_failure(backend, hint):
    from mmeval.core.errors import GroupPoisonedError

    if hint is not None:
        backend.new_group_hint = hint  # as a backend class would declare it
    assert _local_error_in_payload(backend, MemoryError, "forged size")  # poisons the group
    with pytest.raises(GroupPoisonedError) as info:
        backend.all_gather_object(1)
    return str(info.value)


@pytest.mark.parametrize("hint", [None, "hub: a new HubDist on a new port"])
def test_a_poisoned_group_says_how_to_build_a_new_one_on_its_own_transport(hint):
    res = run_ranks(_refusal_after_a_local_failure, 2, hint, timeout=60)
    for status, text in res.values():
        assert status == "ok", text
        # the default names no framework: a third party's users are never told to build torch or MPI groups
        default = "for example a new communicator or connection of this backend's transport"
        assert f"Build a new group ({hint or default})" in text, text
        assert "torch" not in text and "MPI" not in text, text


def _ask(backend, questions):
    from mmeval.core.dist_backends import asking

    try:
        with asking(questions[backend.rank]):
            return {"value": backend.all_gather_object(backend.rank)}
    except CollectiveMismatchError as exc:
        return {"error": str(exc)}


def _questions(case):
    import numpy as np

    base = {"metric": "m.Metric", "size": 10}
    if case == "numpy scalar":  # one numpy value among others, past what the old slot text showed
        pair = [np.float32(0.5), np.float32(0.7)]  # the same length of text
        return [dict(base, nan_to_num=("x" * 150, pair[r])) for r in range(2)]
    if case == "65-item list":
        return [dict(base, thrs=[0.5] * 64 + [0.1 * (r + 1)]) for r in range(2)]
    return [dict(base, topk=tuple(range(59)) + (59 - r,)) for r in range(2)]  # differ at the 230th character


@pytest.mark.parametrize(
    "case,field", [("numpy scalar", "nan_to_num"), ("65-item list", "thrs"), ("past the 140th character", "topk")]
)
def test_questions_differing_anywhere_in_any_value_raise_on_every_rank_naming_the_field(case, field):
    questions = _questions(case)
    res = run_ranks(_ask, 2, questions, timeout=60)
    for status, value in res.values():
        assert status == "ok", value
        assert "error" in value, f"{case}: ranks with different questions got an answer: {value}"
        assert f"{field}: rank 0=" in value["error"] and "rank 1=" in value["error"], value["error"]
    same = run_ranks(_ask, 2, [questions[0], questions[0]], timeout=60)
    assert all(v == ("ok", {"value": [0, 1]}) for v in same.values())


def test_canonical_question_covers_any_value_and_drops_none():
    import numpy as np

    from mmeval.core.wire import canonical_question

    class Thing:
        def __init__(self, x):
            self.x = x

    distinct = [
        0.5,
        np.float32(0.5),
        np.float64(0.5),
        0.5000000000000001,
        -0.0,
        0.0,
        [0.5] * 65,
        [0.5] * 64 + [0.6],
        "a" * 200,
        "a" * 199 + "b",
        {"k": (1, 2)},
        {"k": (1, 3)},
        Thing(1),
        Thing(2),
        np.arange(3),
        np.arange(3, dtype=np.int32),
        None,
        (1,),
        [1],
        {1},
        b"1",
        "1",
        1,
        True,
    ]
    encodings = [canonical_question({"v": v}) for v in distinct]
    assert len(set(encodings)) == len(distinct)
    assert canonical_question({"a": 1, "b": {"y": 2, "x": 1}}) == canonical_question({"b": {"x": 1, "y": 2}, "a": 1})
    assert canonical_question({"v": Thing(1)}) == canonical_question({"v": Thing(1)})  # no memory address
    assert canonical_question({"v": float("nan")}) == canonical_question({"v": float("nan")})
    loop = []
    loop.append(loop)
    assert canonical_question({"v": loop})  # cycles are cut


def _late_peer(backend, delay):
    """Rank 1 calls and gives up after its timeout; rank 0 -- the hub relaying every message -- calls later.

    Rank 1's slot still waits in rank 0's socket, so rank 0's call pairs with rank 1's abandoned one.
    """
    import time

    from mmeval.core.errors import DistCommunicationError

    if backend.rank == 0:
        time.sleep(delay)
    started = time.monotonic()
    try:
        out = backend.all_gather_object(f"rank {backend.rank}")
    except DistCommunicationError as exc:
        out = exc
    seconds = time.monotonic() - started
    if backend.rank == 1:
        time.sleep(delay + 1)  # alive (its connection open) while rank 0 calls
    kind = type(out).__name__ if isinstance(out, BaseException) else "answer"
    return kind, str(out), backend.poisoned is not None, seconds


def test_a_late_rank_never_completes_a_call_its_peer_gave_up():
    res = run_ranks(_late_peer, 2, 3.0, backend_kwargs={"timeout": 1.0}, timeout=60)
    assert res[1][0] == "ok" and res[1][1][0] == "CollectiveTimeoutError", res[1]
    status, (kind, text, poisoned, seconds) = res[0]
    assert status == "ok"
    assert kind == "CollectiveFailedError", f"rank 0 completed the call rank 1 gave up: {text}"
    assert "rank 1" in text and "deadline" in text and poisoned and seconds < 1.0, text


def _clock_behind(backend, back, delay):
    """Rank 1's ``time.time()`` runs ``back`` s behind rank 0's, and rank 1 calls ``delay`` s after rank 0."""
    import time

    from mmeval.core.errors import DistCommunicationError

    real = time.time
    if backend.rank == 1:
        time.time = lambda: real() - back  # this rank's host clock is behind
        time.sleep(delay)
    try:
        out = backend.all_gather_object(backend.rank)
    except DistCommunicationError as exc:
        out = exc
    finally:
        time.time = real
    if isinstance(out, BaseException):
        return type(out).__name__, str(out), backend.poisoned is not None
    return "answer", out, backend.poisoned is not None


def test_a_clock_behind_by_more_than_the_timeout_fails_the_call_on_every_rank():
    # rank 1's clock 15 s behind at a 2 s timeout: its window ended, as rank 0 reads the wall clocks, 13 s before
    # rank 0's began. Before, rank 0 refused (rank 1's deadline long past) and rank 1 answered (rank 0's far ahead).
    res = run_ranks(_clock_behind, 2, 15.0, 0.0, backend_kwargs={"timeout": 2.0}, timeout=60)
    for r in (0, 1):
        status, (kind, text, poisoned) = res[r]
        assert status == "ok" and kind == "CollectiveFailedError", f"rank {r}: {kind} {text}"
        assert "clock" in text and "window" in text and "rank 1" in text and "rank 0" in text and poisoned, text


def test_a_clock_behind_whose_windows_still_overlap_completes_on_every_rank():
    # rank 1 calls 1.5 s after rank 0 (both within a 2 s timeout), its clock 3.75 s behind: the windows [0, 2] and
    # [-2.25, -0.25] as the clocks read them overlap within DEADLINE_SKEW. Before, rank 0 received rank 1's header
    # 1.75 s after rank 1's deadline as rank 0's clock read it and refused, while rank 1 answered.
    res = run_ranks(_clock_behind, 2, 3.75, 1.5, backend_kwargs={"timeout": 2.0}, timeout=60)
    for r in (0, 1):
        assert res[r] == ("ok", ("answer", [0, 1], False)), f"rank {r}: {res[r]}"


def _windows(*pairs):
    from mmeval.core.wire import SlotHeader

    return [SlotHeader(0, 1, 1, 1, -1, 0, False, None, "", deadline, start) for start, deadline in pairs]


def test_the_window_verdict_reads_the_headers_alone_so_every_rank_reaches_it():
    from mmeval.core.dist_backends.guard import late_ranks
    from mmeval.core.wire import DEADLINE_SKEW

    t = 1.7e9
    assert late_ranks(_windows((t, t + 5), (t + 5 + DEADLINE_SKEW, t + 10))) is None  # overlapping within the skew
    assert late_ranks(_windows((t, t + 5), (t + 6.01, t + 11))) == ([1], [0])  # rank 1 called after rank 0 gave up
    # host b (ranks 2, 3) 15 s behind at a 5 s timeout: the same verdict whichever rank reads it
    assert late_ranks(_windows((t, t + 5), (t + 0.1, t + 5.1), (t - 15, t - 10), (t - 14.9, t - 9.9))) == (
        [0, 1],
        [2, 3],
    )
    assert late_ranks(_windows((t, 0.0), (t + 1e6, 0.0))) is None  # no deadline: no window ends
