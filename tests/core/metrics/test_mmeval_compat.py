"""MMEval 0.2.1's public import paths, ``mmeval.utils`` and its AssertionError on unknown backends (issue 13.1).

The names below were listed from MMEval 0.2.1's sources (the ``__all__`` of
``mmeval.core``, ``mmeval.core.dist_backends`` and ``mmeval.utils``, and the
classes each ``dist_backends`` module defines). A plugin class resolves to the
installed plugin's class, or raises the install-hint ImportError when the
plugin is not installed, so this file passes with or without plugins.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from mmeval.core import dist
from mmeval.core.dist_backends import BaseDistBackend, NonDist
from mmeval.core.dist_backends._compat import LEGACY_BACKENDS
from mmeval.core.errors import (
    BackendLoadError,
    BackendNotFoundError,
    BackendNotInstalledError,
    InvalidBackendNameError,
)

DB = "mmeval.core.dist_backends"

#: Every public name of MMEval 0.2.1 under mmeval.core and mmeval.core.dist_backends, by module.
MMEVAL_021_PUBLIC = {
    "mmeval.core": ["dist_backends", "get_dist_backend", "set_default_dist_backend", "list_all_backends", "BaseMetric"],
    "mmeval.core.dist": ["get_dist_backend", "set_default_dist_backend", "list_all_backends"],
    "mmeval.core.base_metric": ["BaseMetric"],
    DB: [
        "BaseDistBackend",
        "TensorBaseDistBackend",
        "MPI4PyDist",
        "NonDist",
        "OneFlowDist",
        "TFHorovodDist",
        "TorchCPUDist",
        "TorchCUDADist",
        "PaddleDist",
    ],
    f"{DB}.base_backend": ["BaseDistBackend", "TensorBaseDistBackend", "Tensor"],
    f"{DB}.non_dist": ["NonDist"],
    f"{DB}.torch_cpu": ["TorchCPUDist"],
    f"{DB}.torch_cuda": ["TorchCUDADist"],
    f"{DB}.mpi4py": ["MPI4PyDist"],
    f"{DB}.tf_horovod": ["TFHorovodDist"],
    f"{DB}.paddle_dist": ["PaddleDist"],
    f"{DB}.oneflow_dist": ["OneFlowDist"],
    "mmeval.utils": [
        "try_import",
        "has_method",
        "is_seq_of",
        "is_list_of",
        "is_tuple_of",
        "is_filepath",
        "DEFAULT_LOGGER",
    ],
}
#: Deliberately absent (README "Coming from MMEval 0.2.1"): plum's multiple-dispatch decorator.
NOT_PROVIDED = {("mmeval.core", "dispatch")}
#: The framework modules none of these imports may load.
FRAMEWORKS = ("torch", "tensorflow", "mpi4py.MPI", "horovod", "paddle", "jax", "oneflow")

CASES = [(mod, name) for mod, names in MMEVAL_021_PUBLIC.items() for name in names]


def _registry_error(name):
    with pytest.raises(BackendNotFoundError) as info:
        dist.get_dist_backend(name)
    return info.value


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_every_mmeval_public_name_resolves_or_names_its_plugin(module, name):
    mod = importlib.import_module(module)
    backend = LEGACY_BACKENDS.get(name)
    if backend is None or backend in dist.list_all_backends():
        value = getattr(mod, name)
        assert value is not None
        if backend is not None:
            assert value is dist.get_dist_backend_class(backend)
            assert issubclass(value, BaseDistBackend)
        return
    with pytest.raises(BackendNotInstalledError) as info:
        getattr(mod, name)
    err = info.value
    assert isinstance(err, ImportError) and isinstance(err, BackendNotFoundError) and err.name == module
    assert f"cannot import {name} from {module}" in str(err)
    # the registry's own message for that name is carried whole
    assert str(_registry_error(backend)) in str(err)
    if backend in dist.KNOWN_DISTRIBUTIONS:
        assert "pip install" in str(err) and dist.KNOWN_DISTRIBUTIONS[backend] in str(err)


@pytest.mark.parametrize(("module", "name"), sorted(NOT_PROVIDED))
def test_what_is_not_provided_is_written_down(module, name):
    assert not hasattr(importlib.import_module(module), name)
    readme = (pathlib.Path(__file__).parents[3] / "README.md").read_text()
    section = readme.split("## Coming from MMEval 0.2.1", 1)[1].split("\n## ", 1)[0]
    assert f"`{module}.{name}`" in section


def test_from_import_statement_raises_an_import_error_with_the_hint():
    if "paddle_dist" in dist.list_all_backends():
        pytest.skip("mmeval-paddle is installed here")
    with pytest.raises(ImportError, match=re.escape(f"cannot import PaddleDist from {DB}.paddle_dist")) as info:
        from mmeval.core.dist_backends.paddle_dist import PaddleDist  # noqa: F401 -- the statement users write
    assert str(_registry_error("paddle_dist")) in str(info.value)
    if "paddle_dist" in dist.KNOWN_DISTRIBUTIONS:
        assert "pip install" in str(info.value) and "mmeval-paddle" in str(info.value)
    with pytest.raises(ImportError, match="cannot import name 'TorchCPUDist'"):
        from mmeval.core.dist_backends.paddle_dist import TorchCPUDist  # noqa: F401 -- one class per module
    mod = importlib.import_module(f"{DB}.torch_cpu")
    with pytest.raises(AttributeError):
        mod.NoSuchDist  # noqa: B018
    assert not hasattr(mod, "MPI4PyDist")


def test_star_import_of_the_backends_package_brings_what_is_installed():
    """MMEval 0.2.1's ``from mmeval.core.dist_backends import *`` worked; here it raised BackendNotInstalledError
    for the first class in ``__all__`` whose plugin is absent (TFHorovodDist without mmeval-horovod, always
    OneFlowDist). It now brings the plugin API and the MMEval class names that resolve here."""
    namespace: dict = {}
    exec("from mmeval.core.dist_backends import *", namespace)  # the statement users write
    installed = set(dist.list_all_backends())
    for cls_name, backend in LEGACY_BACKENDS.items():
        assert (cls_name in namespace) == (backend in installed), cls_name
    for name in ("BaseDistBackend", "FramedDistBackend", "NonDist", "Call", "PeerLost", "native_pairs"):
        assert name in namespace, name
    assert "OneFlowDist" not in namespace


def test_a_registered_backend_is_what_the_mmeval_path_returns():
    class MyPaddle(NonDist):
        pass

    from mmeval.core.dist_backends import paddle_dist

    dist.register_dist_backend("paddle_dist", MyPaddle, override=True)
    assert paddle_dist.PaddleDist is MyPaddle
    from mmeval.core import dist_backends

    assert dist_backends.PaddleDist is MyPaddle
    dist.unregister_dist_backend("paddle_dist")


def test_oneflow_raises_the_registrys_unsupported_error():
    expected = _registry_error("oneflow_cpu")
    from mmeval.core.dist_backends import oneflow_dist

    for owner in (oneflow_dist, importlib.import_module(DB)):
        with pytest.raises(BackendNotInstalledError) as info:
            owner.OneFlowDist  # noqa: B018
        assert str(expected) in str(info.value) and "pip install" not in str(info.value).replace(str(expected), "")
        assert isinstance(info.value.__cause__, type(expected))


def test_a_plugin_that_fails_to_load_is_not_reported_as_missing(monkeypatch):
    """Only a missing backend becomes the install hint; a broken one keeps its own error."""
    from mmeval.core.dist_backends import _compat

    if "star_broken" not in dist.list_all_backends():
        pytest.skip("needs the fixture plugin mmeval-fixture-plugin (installed in the core env)")
    monkeypatch.setitem(_compat.LEGACY_BACKENDS, "StarBrokenDist", "star_broken")
    with pytest.raises(BackendLoadError) as info:
        _compat.resolve(DB, "StarBrokenDist")
    assert not isinstance(info.value, BackendNotInstalledError) and "libstar_native" in str(info.value)


# --- unknown names: BackendNotFoundError, and AssertionError as in MMEval ---------------------------------------


@pytest.mark.parametrize("call", [dist.get_dist_backend, dist.set_default_dist_backend, dist.get_dist_backend_class])
def test_unknown_backend_is_still_caught_as_mmeval_did(call):
    for base in (AssertionError, BackendNotFoundError, LookupError):
        with pytest.raises(base, match="unknown dist backend 'xxxx'"):
            call("xxxx")
    try:
        call("xxxx")
    except AssertionError:  # MMEval 0.2.1 users' code
        pass


@pytest.mark.parametrize("bad", ["Torch_CPU", "torch-cpu"])
def test_a_malformed_name_is_also_an_assertion_error(bad):
    for call in (dist.get_dist_backend, dist.set_default_dist_backend):
        with pytest.raises(AssertionError):
            call(bad)
    with pytest.raises(InvalidBackendNameError) as info:  # a ValueError, and an AssertionError as in MMEval
        dist.set_default_dist_backend(bad)
    assert isinstance(info.value, ValueError) and isinstance(info.value, AssertionError)


@pytest.mark.parametrize("bad", ["Torch_CPU", "torch-cpu", "bad name!", 3])
def test_a_malformed_name_is_invalid_wherever_it_is_asked(bad):
    """The README's promise ("a malformed one raises InvalidBackendNameError") holds for every lookup, not only
    for set_default_dist_backend: get_dist_backend and get_dist_backend_class raised BackendNotFoundError."""
    for call in (dist.get_dist_backend, dist.get_dist_backend_class, dist.set_default_dist_backend):
        with pytest.raises(InvalidBackendNameError, match="names match"):
            call(bad)


def test_a_bad_default_from_the_environment_is_still_an_assertion_error(monkeypatch):
    monkeypatch.setenv("MMEVAL_DIST_BACKEND", "xxxx")
    with pytest.raises(AssertionError, match="MMEVAL_DIST_BACKEND"):
        dist.get_dist_backend()


# --- mmeval.utils -------------------------------------------------------------------------------------------------


def test_try_import(tmp_path, monkeypatch):
    from mmeval.utils import try_import

    assert try_import("json") is sys.modules["json"]
    assert try_import("os.path") is sys.modules["os.path"]
    assert try_import("mmeval_no_such_module_13") is None
    assert try_import("json.no_such_submodule") is None
    assert try_import(".misc", package="mmeval.utils") is sys.modules["mmeval.utils.misc"]
    (tmp_path / "needs_missing.py").write_text("import mmeval_no_such_dependency_13\n")
    (tmp_path / "buggy_module_13.py").write_text("raise ValueError('a bug, not a missing install')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert try_import("needs_missing") is None  # a module whose own import is missing counts as missing
    with pytest.raises(ValueError, match="a bug"):
        try_import("buggy_module_13")


def test_utils_checks():
    from mmeval.utils import DEFAULT_LOGGER, has_method, is_filepath, is_list_of, is_seq_of, is_tuple_of
    from mmeval.utils.misc import try_import as from_misc
    from mmeval.utils.path import is_filepath as from_path

    assert from_misc("json") is sys.modules["json"] and from_path is is_filepath
    assert is_seq_of(["a", "b"], str) and is_seq_of(("a",), str) and not is_seq_of(["a", 1], str)
    assert is_seq_of([], int) and not is_seq_of("ab", int) and not is_seq_of({1}, int)
    assert is_seq_of([1, 2.0], (int, float)) and is_seq_of((1,), int, seq_type=tuple)
    assert is_list_of([1], int) and not is_list_of((1,), int) and is_tuple_of((1,), int) and not is_tuple_of([1], int)
    with pytest.raises(TypeError, match="seq_type"):
        is_seq_of([1], int, seq_type="list")
    assert has_method("", "upper") and not has_method("", "nope") and not has_method(NonDist, "__doc__")
    assert is_filepath("a.txt") and is_filepath(pathlib.Path("a")) and not is_filepath(b"a")
    assert DEFAULT_LOGGER.name == "mmeval" and not DEFAULT_LOGGER.handlers


# --- importing all of it loads no framework -----------------------------------------------------------------------


def test_importing_every_mmeval_path_loads_no_framework():
    code = textwrap.dedent(f"""
        import importlib, json, sys
        public = {json.dumps(MMEVAL_021_PUBLIC)}
        got = {{}}
        for module, names in public.items():
            importlib.import_module(module)
        imported = sorted(m for m in {FRAMEWORKS!r} if m in sys.modules)
        for module, names in public.items():
            for name in names:
                try:
                    getattr(sys.modules[module], name)
                    got[module + "." + name] = "ok"
                except ImportError as exc:
                    got[module + "." + name] = type(exc).__name__
        after_access = sorted(m for m in {FRAMEWORKS!r} if m in sys.modules)
        print(json.dumps({{"imported": imported, "after_access": after_access, "got": got}}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["imported"] == [], f"importing MMEval's paths loaded {out['imported']}"
    assert out["after_access"] == [], f"resolving MMEval's classes loaded {out['after_access']}"
    assert set(out["got"].values()) <= {"ok", "BackendNotInstalledError"}
    assert len(out["got"]) == len(CASES)


# --- the metrics' bad arguments: MetricArgumentError, a ValueError and MMEval's AssertionError (issue 22 item 4) ----


def _labels_without_num_classes():
    from mmeval.metrics import SingleLabelMetric

    SingleLabelMetric().add([1, 2, 0], [0, 2, 1])


def _argument_cases():
    """``(id, call, match)``: each call refuses one argument; ``match`` is in the message (MMEval's own phrase where
    MMEval's tests match one)."""
    import numpy as np

    from mmeval.metrics import Accuracy, AveragePrecision, MeanIoU, MultiLabelMetric, SingleLabelMetric

    def PrecisionRecallF1score(**kwargs):  # imported when called: the table is built at collection
        from mmeval.metrics import PrecisionRecallF1score

        return PrecisionRecallF1score(**kwargs)

    def add(make, *args):
        return lambda: make().add(*args)

    def set_attr(make, name, value):
        return lambda: setattr(make(), name, value)

    scores3 = np.full((2, 3), 0.3)
    return [
        ("Accuracy-topk", lambda: Accuracy(topk=0), "topk must be a positive int"),
        ("Accuracy-topk-empty", lambda: Accuracy(topk=()), "topk must be a positive int"),
        ("Accuracy-thrs", lambda: Accuracy(thrs=float("nan")), "thrs must be a finite number"),
        ("Accuracy-add-topk", add(lambda: Accuracy(topk=5), scores3, [0, 1]), r"topk=\(5,\) asks for more"),
        ("Accuracy-add-nan", add(Accuracy, np.full((1, 3), np.nan), [0]), "predictions holds NaN"),
        ("Accuracy-add-mixed", lambda: _mixed(Accuracy()), "cannot be mixed"),
        ("SingleLabel-num_classes", lambda: SingleLabelMetric(num_classes=0), "num_classes must be a positive int"),
        ("SingleLabel-thrs", lambda: SingleLabelMetric(thrs="x"), "thrs must be a finite number"),
        ("SingleLabel-items", lambda: SingleLabelMetric(items=("map",)), "The metric map is not supported"),
        ("SingleLabel-average", lambda: SingleLabelMetric(average="mean"), "Invalid `average` argument"),
        ("SingleLabel-add-no-num_classes", _labels_without_num_classes, "Please specify `num_classes`"),
        (
            "SingleLabel-add-classes",
            add(lambda: SingleLabelMetric(num_classes=2), scores3, [0, 1]),
            "Number of classes does not match",
        ),
        ("SingleLabel-add-nan", add(SingleLabelMetric, np.full((1, 3), np.nan), [0]), "predictions holds NaN"),
        ("MultiLabel-num_classes", lambda: MultiLabelMetric(None), "num_classes must be a positive int"),
        ("MultiLabel-thr", lambda: MultiLabelMetric(3, thr="x"), "thr must be a finite number"),
        ("MultiLabel-topk", lambda: MultiLabelMetric(3, topk=4), r"topk must be None or an int in \[1, num_classes"),
        ("MultiLabel-items", lambda: MultiLabelMetric(3, items=("map",)), "The metric map is not supported"),
        ("MultiLabel-average", lambda: MultiLabelMetric(3, average="mean"), "Invalid `average` argument"),
        (
            "MultiLabel-pred_is_onehot",
            lambda: MultiLabelMetric(3, pred_is_onehot="yes"),
            "pred_is_onehot must be None, True or False",
        ),
        (
            "MultiLabel-label_is_onehot-attr",
            set_attr(lambda: MultiLabelMetric(3), "label_is_onehot", 1),
            "label_is_onehot must be None, True or False",
        ),
        ("MultiLabel-add-lengths", add(lambda: MultiLabelMetric(3), scores3, [[0]]), "different lengths"),
        ("MultiLabel-add-label-range", add(lambda: MultiLabelMetric(3), scores3[:1], [[0, 3]]), "out of range"),
        (
            "MultiLabel-add-onehot-shape",
            add(lambda: MultiLabelMetric(3, label_is_onehot=True), scores3[:1], [[0]]),
            "label_is_onehot=True reads every sample as 3 one-hot values",
        ),
        ("AP-average", lambda: AveragePrecision(average="micro"), "Invalid `average` argument"),
        ("AP-pred_is_onehot", set_attr(AveragePrecision, "pred_is_onehot", True), "pred_is_onehot must stay False"),
        ("AP-label_is_onehot", lambda: AveragePrecision(label_is_onehot="no"), "label_is_onehot must be None"),
        ("AP-add-shape", add(AveragePrecision, [0.1, 0.9], [0, 1]), r"scores of shape \(N, C\)"),
        ("MeanIoU-num_classes", lambda: MeanIoU(num_classes=0), "num_classes must be a positive int"),
        ("MeanIoU-ignore_index", lambda: MeanIoU(ignore_index=1.5), "ignore_index must be an int"),
        ("MeanIoU-nan_to_num", lambda: MeanIoU(nan_to_num="x"), "nan_to_num must be a number"),
        ("MeanIoU-beta", lambda: MeanIoU(beta=0), "beta must be a positive finite number"),
        ("MeanIoU-classwise_results", lambda: MeanIoU(classwise_results="yes"), "classwise_results must be True"),
        (
            "MeanIoU-add-no-num_classes",
            add(MeanIoU, np.zeros((1, 2, 2)), np.zeros((1, 2, 2))),
            "num_classes is not set",
        ),
        (
            "MeanIoU-add-shapes",
            add(lambda: MeanIoU(num_classes=2), [np.zeros((2, 2))], [np.zeros((2, 3))]),
            "must have its label map's",
        ),
        (
            "MeanIoU-add-ndim",
            add(lambda: MeanIoU(num_classes=2), [np.zeros(4)], [np.zeros(4)]),
            r"must be an \(H, W\) label map",
        ),
        ("PRF-task", lambda: PrecisionRecallF1score(task="threeclasses"), "Expected argument `task` to either be"),
        (
            "PRF-multilabel-thrs",
            lambda: PrecisionRecallF1score(task="multilabel", num_classes=3, thrs=(0.1, 0.4)),
            "task `'multilabel'` only supports",
        ),
        ("PRF-multilabel-num_classes", lambda: PrecisionRecallF1score(task="multilabel"), "`num_classes` is necessary"),
        ("PRF-singlelabel-average", lambda: PrecisionRecallF1score(average="mean"), "Invalid `average` argument"),
    ]


def _mixed(metric):
    import numpy as np

    metric.add(np.eye(3)[[0, 1]], [0, 1])
    metric.add(np.asarray([0, 1]), [0, 1])


ARGUMENT_CASES = _argument_cases()


@pytest.mark.parametrize(("call", "match"), [c[1:] for c in ARGUMENT_CASES], ids=[c[0] for c in ARGUMENT_CASES])
def test_a_refused_metric_argument_is_a_value_error_and_mmevals_assertion_error(call, match):
    from mmeval.core.errors import MetricArgumentError

    with pytest.raises(AssertionError, match=match) as info:  # MMEval 0.2.1 asserted: its users catch that
        call()
    assert isinstance(info.value, MetricArgumentError) and isinstance(info.value, ValueError)
    with pytest.raises(ValueError, match=match):  # everyone else
        call()


# --- MMEval 0.2.1's deprecated metric aliases ---------------------------------------------------------------------

#: MMEval 0.2.1's mmeval/metrics/__init__.py __deprecated_metric_names__, less the two this project keeps as
#: plain names (SingleLabelMetric, MultiLabelMetric: docs/metrics.md)
MMEVAL_DEPRECATED = {
    "COCODetectionMetric": "COCODetection",
    "F1Metric": "F1Score",
    "MAE": "MeanAbsoluteError",
    "MSE": "MeanSquaredError",
    "PSNR": "PeakSignalNoiseRatio",
    "SNR": "SignalNoiseRatio",
    "SSIM": "StructuralSimilarity",
    "SAD": "SumAbsoluteDifferences",
    "MattingMSE": "MattingMeanSquaredError",
}


def test_the_alias_table_is_mmevals():
    import mmeval.metrics

    assert mmeval.metrics.__deprecated_metric_names__ == MMEVAL_DEPRECATED
    for alias in MMEVAL_DEPRECATED:  # aliases are not listed: `from mmeval.metrics import *` does not warn
        assert alias not in mmeval.metrics.__all__


@pytest.mark.parametrize("alias", sorted(MMEVAL_DEPRECATED))
def test_each_deprecated_alias_warns_and_resolves_lazily(alias, monkeypatch):
    """Through mmeval.metrics and mmeval, the alias warns naming the new name and returns what that name is
    when asked (a metric whose module lands later included: a stand-in class here)."""
    import warnings

    import mmeval
    import mmeval.metrics

    new = MMEVAL_DEPRECATED[alias]
    real = getattr(mmeval.metrics, new, None)
    target = real if real is not None else type(new, (), {})
    monkeypatch.setattr(mmeval.metrics, new, target, raising=False)
    for get in (lambda: getattr(mmeval.metrics, alias), lambda: getattr(mmeval, alias)):
        with pytest.warns(DeprecationWarning, match=f"`{alias}` is MMEval 0.2.1's deprecated alias of `{new}`") as rec:
            assert get() is target
        assert rec[0].filename == __file__  # attributed to the user's line
    ns: dict = {}
    with pytest.warns(DeprecationWarning, match=new):
        exec(f"from mmeval.metrics import {alias}", ns)
    assert ns[alias] is target
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(mmeval.metrics, new) is target  # the new name itself does not warn
    assert alias not in vars(mmeval.metrics) and alias not in vars(mmeval)  # never cached: it warns at every use


@pytest.mark.parametrize("alias", sorted(MMEVAL_DEPRECATED))
def test_an_alias_whose_metric_is_absent_says_so_without_warning(alias, monkeypatch):
    import warnings

    import mmeval
    import mmeval.metrics

    new = MMEVAL_DEPRECATED[alias]
    monkeypatch.delattr(mmeval.metrics, new, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for owner in (mmeval.metrics, mmeval):
            with pytest.raises(
                AttributeError, match=f"deprecated alias of '{new}'" if owner is mmeval.metrics else alias
            ):
                getattr(owner, alias)
        with pytest.raises(ImportError, match=alias):
            exec(f"from mmeval.metrics import {alias}", {})


def test_unknown_names_are_still_attribute_errors():
    import mmeval
    import mmeval.metrics

    for owner in (mmeval, mmeval.metrics):
        with pytest.raises(AttributeError, match="NoSuchMetric"):
            owner.NoSuchMetric  # noqa: B018


def test_both_names_of_the_precision_recall_f1_metrics_are_plain_names():
    """MMEval 0.2.1 names the classes *PrecisionRecallF1score and deprecates SingleLabelMetric / MultiLabelMetric;
    here both are the same classes and neither warns (this project's docs use the short names)."""
    import warnings

    import mmeval
    from mmeval.metrics import precision_recall_f1score as prf

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for short, long in (
            ("SingleLabelMetric", "SingleLabelPrecisionRecallF1score"),
            ("MultiLabelMetric", "MultiLabelPrecisionRecallF1score"),
        ):
            assert getattr(mmeval.metrics, short) is getattr(mmeval.metrics, long) is getattr(mmeval, long)
            assert getattr(prf, short) is getattr(prf, long) is getattr(mmeval, short)
            assert short in mmeval.metrics.__all__ and long in mmeval.metrics.__all__
        assert mmeval.PrecisionRecallF1score is prf.PrecisionRecallF1score
