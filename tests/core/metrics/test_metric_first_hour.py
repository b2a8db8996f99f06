"""What a new user sees of every metric: ``indices=`` in the signature, warnings at their own line, clear errors."""

from __future__ import annotations

import inspect
import pydoc
import warnings

import numpy as np
import pytest
from metric_helpers import real_torch

import mmeval.metrics as metrics
from mmeval import Accuracy
from mmeval.core import BaseMetric
from mmeval.metrics import AveragePrecision, MeanIoU, MultiLabelMetric, SingleLabelMetric

EVERY_METRIC = sorted(
    {cls for cls in vars(metrics).values() if isinstance(cls, type) and issubclass(cls, BaseMetric)},
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", EVERY_METRIC, ids=lambda c: c.__name__)
def test_indices_is_in_the_signature_and_help_of_every_metric_add(cls):
    sig = inspect.signature(cls.add)
    param = sig.parameters["indices"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is None
    assert list(sig.parameters)[:1] == ["self"]
    assert "indices=None" in pydoc.render_doc(cls.add)


def test_a_metric_with_var_keywords_keeps_them_last():
    class Kw(BaseMetric):
        def add(self, x, **extra):  # type: ignore[override]
            self._results.append(x)

        def compute_metric(self, results):
            return {"n": len(results)}

    assert str(inspect.signature(Kw.add)) == "(self, x, *, indices=None, **extra)"


def test_warnings_point_at_the_callers_line():
    scores = np.eye(3)
    labels = np.arange(3)
    cases = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        acc = Accuracy(topk=(1, 2), thrs=None)
        acc.add(np.arange(3), labels)  # TopkWithLabelsWarning at add()
        cases.append("add")
        acc2 = Accuracy(thrs=None)
        acc2.add(scores, labels)
        acc2.compute(size=4)  # fewer results than size: RuntimeWarning at compute()
        cases.append("compute")
        acc3 = Accuracy()
        acc3.add(scores - 2, labels)  # the true class wins with a score <= 0
        acc3.compute()  # DefaultThresholdWarning from compute_metric
        cases.append("thrs")
        MultiLabelMetric(num_classes=3, thr=0.5, topk=1)  # both given: UserWarning at __init__
        cases.append("init")
    assert len(caught) >= len(cases), [str(w.message) for w in caught]
    for w in caught:
        assert w.filename == __file__, (w.filename, str(w.message))


def test_a_meta_tensor_names_the_argument():
    torch = real_torch()
    acc = Accuracy(thrs=None)
    with pytest.raises(TypeError, match=r"predictions: a tensor on the 'meta' device"):
        acc.add(torch.empty(3, 4, device="meta"), torch.arange(3))
    with pytest.raises(TypeError, match=r"labels: a tensor on the 'meta' device"):
        acc.add(torch.zeros(3, 4), torch.empty(3, device="meta"))
    with pytest.raises(TypeError, match=r"indices=.*'meta' device"):
        acc.add(torch.zeros(3, 4), torch.arange(3), indices=torch.empty(3, device="meta"))
    assert acc.num_results == 0


@pytest.mark.parametrize(
    ("make", "bad", "hint"),
    [
        (lambda: Accuracy(top_k=3), "top_k", "topk"),
        (lambda: AveragePrecision(averge="macro"), "averge", "average"),
        (lambda: SingleLabelMetric(num_class=3), "num_class", "num_classes"),
        (lambda: MeanIoU(num_classes=3, dist_backnd="non_dist"), "dist_backnd", "dist_backend"),
    ],
)
def test_an_unknown_argument_names_the_metric_and_the_close_one(make, bad, hint):
    with pytest.raises(TypeError) as info:
        make()
    message = str(info.value)
    assert "BaseMetric" not in message
    assert f"unexpected keyword argument {bad!r}; did you mean {hint!r}?" in message


@pytest.mark.parametrize("cls", EVERY_METRIC, ids=lambda c: c.__name__)
def test_each_metric_docstring_states_its_units_and_mmeval_compatibility(cls):
    doc = inspect.getdoc(cls) or ""
    assert "Units:" in doc and "MMEval" in doc, cls
