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
    "mmeval.core": ["dist_backends", "get_dist_backend", "set_default_dist_backend", "list_all_backends",
                    "BaseMetric"],
    "mmeval.core.dist": ["get_dist_backend", "set_default_dist_backend", "list_all_backends"],
    "mmeval.core.base_metric": ["BaseMetric"],
    DB: ["BaseDistBackend", "TensorBaseDistBackend", "MPI4PyDist", "NonDist", "OneFlowDist", "TFHorovodDist",
         "TorchCPUDist", "TorchCUDADist", "PaddleDist"],
    f"{DB}.base_backend": ["BaseDistBackend", "TensorBaseDistBackend", "Tensor"],
    f"{DB}.non_dist": ["NonDist"],
    f"{DB}.torch_cpu": ["TorchCPUDist"],
    f"{DB}.torch_cuda": ["TorchCUDADist"],
    f"{DB}.mpi4py": ["MPI4PyDist"],
    f"{DB}.tf_horovod": ["TFHorovodDist"],
    f"{DB}.paddle_dist": ["PaddleDist"],
    f"{DB}.oneflow_dist": ["OneFlowDist"],
    "mmeval.utils": ["try_import", "has_method", "is_seq_of", "is_list_of", "is_tuple_of", "is_filepath",
                     "DEFAULT_LOGGER"],
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
    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
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
