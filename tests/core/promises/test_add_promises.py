"""What add() and compute(size=) promise in real multi-rank worlds (issue 32, items 2, 7, 9): nothing lost silently.

* A refused add() -- any metric, any argument -- makes the next compute() raise on every rank, naming the
  rank, the metric and the argument, until reset().
* add() from several threads at once keeps every sample (calls are serialized).
* More samples than size= can explain is an error on every rank naming reset(), size=len(dataset), indices=.

Every multi-rank test runs real processes over the hub test backend (TCP); see hub_backend.py.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Dict, Tuple

import numpy as np
import pytest
from hub_backend import run_ranks
from metric_helpers import Ids, ObjectIds, class_scores

from mmeval import BLEU, Accuracy, F1Score, MeanAbsoluteError, VOCMeanAP

TIMEOUT = 20.0


def _voc_good(i: int) -> Tuple[Any, ...]:
    box = np.array([[i, i, i + 10.0, i + 10.0]])
    pred = {"bboxes": box, "scores": np.array([0.5 + 0.01 * i]), "labels": np.array([i % 2])}
    return [pred], [{"bboxes": box, "labels": np.array([i % 2])}]


def _voc_bad() -> Tuple[Any, ...]:
    pred = {"bboxes": np.array([[0, 0, 10, np.nan]]), "scores": np.array([0.5]), "labels": np.array([0])}
    return [pred], [{"bboxes": np.array([[0, 0, 10, 10.0]]), "labels": np.array([0])}]


def _scores(i: int) -> Tuple[Any, ...]:
    s, y = class_scores(12, 3, 5)
    return s[[i]], y[[i]]


#: name -> (make, a good batch for sample i, a refused batch, a word of the refusal naming the argument)
CASES: Dict[str, Tuple[Callable[..., Any], Callable[[int], Tuple[Any, ...]], Callable[[], Tuple[Any, ...]], str]] = {
    "VOCMeanAP": (lambda **kw: VOCMeanAP(num_classes=2, **kw), _voc_good, _voc_bad, "bboxes"),
    "BLEU": (
        lambda **kw: BLEU(**kw),
        lambda i: ([f"a b c {i}"], [[f"a b c {i}"]]),
        lambda: ([None], [["a"]]),
        "predictions",
    ),
    "MeanAbsoluteError": (
        lambda **kw: MeanAbsoluteError(**kw),
        lambda i: ([np.full((3, 4, 4), float(i))], [np.zeros((3, 4, 4))]),
        lambda: ([np.zeros((3, 4, 4))], [np.zeros((3, 5, 4))]),
        "groundtruths",
    ),
    "F1Score": (
        lambda **kw: F1Score(num_classes=3, **kw),
        lambda i: ([np.array([i % 3])], [np.array([0])]),
        lambda: ([np.array([0, 1])], [np.array([0])]),
        "labels",
    ),
    "Accuracy": (lambda **kw: Accuracy(**kw), _scores, lambda: (np.zeros((3, 3)), np.zeros(2, int)), "labels"),
}


def _outcome(fn: Callable[[], Any]) -> Tuple[str, str]:
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "ok", ""


def _refused_add_worker(backend: Any, name: str) -> Dict[str, Any]:
    make, good, bad, _ = CASES[name]
    metric = make(dist_backend=backend)
    mine = list(range(backend.rank, 12, backend.world_size))
    out: Dict[str, Any] = {}
    for i in mine:
        metric.add(*good(i))
        if backend.rank == 1 and i == mine[0]:
            out["add"] = _outcome(lambda: metric.add(*bad()))  # the user catches it and goes on
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no size=: the ShardingWarning
        out["compute"] = _outcome(metric.compute)
        metric.reset()  # forgets the refusal
        for i in mine:
            metric.add(*good(i))
        out["after_reset"] = _outcome(metric.compute)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_refused_add_makes_the_next_compute_raise_on_every_rank_naming_rank_metric_and_argument(name):
    out = run_ranks(_refused_add_worker, 2, name, timeout=90, backend_kwargs={"timeout": TIMEOUT})
    word = CASES[name][3]
    assert out[1][0] == "ok" and out[1][1]["add"][0] != "ok", out[1]
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        kind, text = got["compute"]
        assert kind != "ok", (rank, name, "compute() answered without the refused batch")
        assert "rank 1" in text and name in text and word in text, (rank, text)
        assert got["after_reset"] == ("ok", ""), (rank, got["after_reset"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_refused_add_in_one_process_makes_compute_raise(name):
    make, good, bad, word = CASES[name]
    metric = make()
    metric.add(*good(0))
    with pytest.raises((ValueError, TypeError)):  # MetricArgumentError is a ValueError
        metric.add(*bad())
    with pytest.raises(ValueError, match="refused since reset") as caught:
        metric.compute()
    assert name in str(caught.value) and word in str(caught.value)
    metric.reset()
    metric.add(*good(0))
    metric.compute()


# -- item 9: more samples than size= can explain ---------------------------------------------------------------------


def _second_epoch_worker(backend: Any, kind: str) -> Tuple[str, str]:
    scores, labels = class_scores(100, 4, 3)
    metric: Any = Accuracy(thrs=None, dist_backend=backend) if kind == "state" else Ids(dist_backend=backend)
    mine = list(range(backend.rank, 50, backend.world_size))
    for epoch in range(2):  # a second epoch without reset(): 100 samples for size=50
        if kind == "state":
            metric.add(scores[[50 * epoch + i for i in mine]], labels[[50 * epoch + i for i in mine]])
        else:
            metric.add([50 * epoch + i for i in mine])
    return _outcome(lambda: metric.compute(size=50))


@pytest.mark.parametrize("kind", ["state", "per_sample"])
@pytest.mark.parametrize("ws", [2, 3])
def test_more_samples_than_size_explains_is_an_error_on_every_rank(kind, ws):
    out = run_ranks(_second_epoch_worker, ws, kind, timeout=90, backend_kwargs={"timeout": TIMEOUT})
    for rank in range(ws):
        status, (exc, text) = out[rank]
        assert status == "ok", text
        assert exc == "ValueError", (rank, exc, text)
        assert "reset()" in text and "size=len(dataset)" in text and "indices=" in text, (rank, text)


@pytest.mark.parametrize("make", [Accuracy, Ids, ObjectIds])
def test_more_samples_than_size_in_one_process_is_an_error(make):
    scores, labels = class_scores(100, 4, 3)
    metric = make()
    for _ in range(2):
        metric.add(scores[:50], labels[:50]) if make is Accuracy else metric.add(list(range(50)))
    with pytest.raises(ValueError, match=r"100 samples were added.*reset\(\).*size=len\(dataset\).*indices="):
        metric.compute(size=50)
    metric.compute(size=100)  # what the samples explain still answers


# -- item 7: add() from several threads ------------------------------------------------------------------------------

THREADS, ROUNDS, BATCH = 4, 200, 4


def _threaded_worker(backend: Any, kind: str) -> Dict[str, Any]:
    ws, rank = backend.world_size, backend.rank
    n = ws * THREADS * ROUNDS * BATCH
    scores, labels = class_scores(n, 4, 9)
    metric: Any = Accuracy(thrs=None, dist_backend=backend) if kind == "state" else ObjectIds(dist_backend=backend)
    start = threading.Barrier(THREADS)

    def feed(t: int) -> None:
        start.wait()
        for r in range(ROUNDS):
            first = ((rank * THREADS + t) * ROUNDS + r) * BATCH
            idx = list(range(first, first + BATCH))
            if kind == "state":
                metric.add(scores[idx], labels[idx], indices=idx)
            else:
                metric.add(idx, indices=idx)

    threads = [threading.Thread(target=feed, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"num_results": metric.num_results, "result": metric.compute()}


@pytest.mark.parametrize("kind", ["state", "per_sample"])
def test_add_from_several_threads_on_two_ranks_loses_no_sample(kind):
    ws = 2
    n = ws * THREADS * ROUNDS * BATCH
    if kind == "state":
        scores, labels = class_scores(n, 4, 9)
        ref = Accuracy(thrs=None)
        ref.add(scores, labels)
        want = ref.compute()
    else:
        want = {"ids": list(range(n))}
    out = run_ranks(_threaded_worker, ws, kind, timeout=120, backend_kwargs={"timeout": 60.0})
    for rank in range(ws):
        status, got = out[rank]
        assert status == "ok", got
        assert got["num_results"] == n // ws
        assert got["result"] == want, (rank, kind)


def test_a_stateless_call_in_one_thread_never_takes_another_threads_add():
    metric = ObjectIds()
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            metric.add([1])

    thread = threading.Thread(target=feed)
    thread.start()
    try:
        for _ in range(200):
            assert metric([7, 8]) == {"ids": [7, 8]}
    finally:
        stop.set()
        thread.join()
    assert set(metric.compute(size=metric.num_results)["ids"]) == {1}
