"""Backend discovery through real entry-point metadata (the fixture distributions are pip-installed)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from mmeval.core import dist
from mmeval.core._metadata import satisfies
from mmeval.core.dist import (
    get_dist_backend,
    list_all_backends,
    register_dist_backend,
    set_default_dist_backend,
)
from mmeval.core.dist_backends import BaseDistBackend, NonDist
from mmeval.core.errors import (
    BackendAlreadyRegisteredError,
    BackendConflictError,
    BackendLoadError,
    BackendNotFoundError,
    BackendTypeError,
    InvalidBackendNameError,
)
from mmeval.core.registry import BackendRegistry

HEAVY = (
    "torch",
    "mpi4py",
    "horovod",
    "tensorflow",
    "mmeval_fixture_plugin",
    "mmeval_fixture_rival",
    "mmeval_torch",
    "mmeval_mpi4py",
    "mmeval_horovod",
)


def run_py(code: str, **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    full.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_list_includes_builtin_and_installed_sorted():
    names = list_all_backends()
    assert names == sorted(names)
    assert "non_dist" in names and "star" in names
    assert "twin" in names  # a conflict is listed once
    assert names.count("twin") == 1
    assert "Star-Invalid" not in names


def test_listing_imports_no_plugin_or_framework():
    out = run_py(
        """
        import sys, json
        import mmeval
        names = mmeval.core.dist.list_all_backends()
        mmeval.core.set_default_dist_backend("star")
        heavy = [m for m in sys.modules if m.split(".")[0] in %r]
        print(json.dumps({"names": names, "heavy": heavy, "numpy": "numpy" in sys.modules}))
    """
        % (HEAVY,)
    )
    data = json.loads(out)
    assert data["heavy"] == []
    assert "star" in data["names"]


def test_listing_loads_only_the_registry_of_mmeval():
    # the collective machinery, the hooks and logging are not needed to list backends: they load on first use
    out = run_py("""
        import sys, json
        from mmeval.core.dist import list_all_backends
        list_all_backends()
        lazy = ["mmeval.core.serialization", "mmeval.core.hooks", "mmeval.core.dist_backends.framed_backend",
                "mmeval.core.base_metric", "logging", "dataclasses"]
        loaded = [m for m in lazy if m in sys.modules]
        import mmeval.core
        ok = mmeval.core.dist_backends.FramedDistBackend.__name__ == "FramedDistBackend"
        ok = ok and mmeval.core.hooks.__name__ == "mmeval.core.hooks" and mmeval.core.serialization.SLOT_SIZE > 0
        print(json.dumps({"loaded": loaded, "ok": ok}))
    """)
    assert json.loads(out) == {"loaded": [], "ok": True}


def test_get_backend_loads_once_and_caches_instance():
    a = get_dist_backend("star")
    b = get_dist_backend("star")
    assert a is b
    assert type(a).__name__ == "StarDist" and isinstance(a, BaseDistBackend)
    assert isinstance(get_dist_backend("non_dist"), NonDist)


def test_five_member_backend_gets_defaults():
    backend = get_dist_backend("star")
    assert backend.gather_object({"x": 1}, dst=0) == [{"x": 1}]
    backend.barrier()
    assert type(backend).detect() is False


# The core env installs no framework plugin; these names stand for "a well-known backend that is not
# installed". (In a dev venv with mmeval-torch installed, pick names that are missing there.)
MISSING_KNOWN = [n for n in dist.KNOWN_DISTRIBUTIONS if n not in dist.list_all_backends()]


def test_unknown_known_backend_names_its_distribution():
    if "torch_cpu" not in MISSING_KNOWN:  # a dev venv with mmeval-torch: it must then load
        assert get_dist_backend("torch_cpu").name == "torch_cpu"
        return
    with pytest.raises(BackendNotFoundError) as info:
        get_dist_backend("torch_cpu")
    msg = str(info.value)
    assert "mmeval-torch" in msg and "pip install mmeval-torch" in msg and "non_dist" in msg
    assert isinstance(info.value, LookupError)
    with pytest.raises(BackendNotFoundError, match="mmeval-horovod"):
        get_dist_backend("tf_horovod")
    with pytest.raises(BackendNotFoundError, match="mmeval-mpi4py"):
        set_default_dist_backend("mpi4py")


def test_unknown_name_lists_installed():
    with pytest.raises(BackendNotFoundError) as info:
        get_dist_backend("nope")
    assert "star" in str(info.value) and "mmeval.dist_backends" in str(info.value)


def test_conflict_names_both_distributions():
    with pytest.raises(BackendConflictError) as info:
        get_dist_backend("twin")
    msg = str(info.value)
    assert "mmeval-fixture-plugin" in msg and "mmeval-fixture-rival" in msg
    with pytest.raises(BackendConflictError):
        set_default_dist_backend("twin")


def test_conflict_resolved_by_override():
    class Chosen(NonDist):
        pass

    register_dist_backend("twin", Chosen, override=True)
    assert type(get_dist_backend("twin")) is Chosen


def test_broken_plugin_fails_alone_with_cause():
    with pytest.raises(BackendLoadError) as info:
        get_dist_backend("star_broken")
    err = info.value
    assert isinstance(err, ImportError)
    assert "star_broken" in str(err) and "mmeval-fixture-plugin" in str(err)
    assert "mmeval_fixture_plugin.broken:BrokenDist" in str(err)
    assert isinstance(err.__cause__, ImportError) and "libstar_native" in str(err.__cause__)
    # listing and other backends unaffected
    assert "star_broken" in list_all_backends()
    assert get_dist_backend("star").rank == 0
    with pytest.raises(BackendLoadError):  # and it fails the same way again
        get_dist_backend("star_broken")


def test_not_a_backend_is_a_type_error():
    with pytest.raises(BackendTypeError) as info:
        get_dist_backend("star_notabackend")
    assert isinstance(info.value, TypeError)
    assert "BaseDistBackend" in str(info.value) and "mmeval-fixture-plugin" in str(info.value)


def test_builtin_name_claim_is_ignored():
    assert isinstance(get_dist_backend("non_dist"), NonDist)
    info = {i.name: i for i in dist.backend_infos()}["non_dist"]
    assert "mmeval-fixture-plugin" in info.error


def test_register_refuses_taken_names():
    class Mine(NonDist):
        pass

    register_dist_backend("mine", Mine)
    assert "mine" in list_all_backends()
    assert type(get_dist_backend("mine")) is Mine
    with pytest.raises(BackendAlreadyRegisteredError):
        register_dist_backend("mine", Mine)
    with pytest.raises(BackendAlreadyRegisteredError, match="mmeval-fixture-plugin"):
        register_dist_backend("star", Mine)
    with pytest.raises(BackendAlreadyRegisteredError, match="built in"):
        register_dist_backend("non_dist", Mine)
    with pytest.raises(RuntimeError):  # as torch's RPC registry raises
        register_dist_backend("mine", Mine)
    with pytest.raises(InvalidBackendNameError):
        register_dist_backend("Bad-Name", Mine)
    with pytest.raises(BackendTypeError):
        register_dist_backend("notcls", object)  # type: ignore[arg-type]
    dist.unregister_dist_backend("mine")
    assert "mine" not in list_all_backends()


def test_default_backend_setting_and_env(monkeypatch):
    assert dist.get_default_dist_backend() == "auto"
    assert dist.resolve_backend_name() == "non_dist"
    set_default_dist_backend("star")
    assert dist.resolve_backend_name() == "star"
    set_default_dist_backend("auto")
    with pytest.raises(InvalidBackendNameError):
        set_default_dist_backend("Not A Name")
    monkeypatch.setattr(dist, "_registry", BackendRegistry())  # a fresh registry: no default set
    monkeypatch.setenv("MMEVAL_DIST_BACKEND", "star")
    assert type(get_dist_backend()).__name__ == "StarDist"
    monkeypatch.setenv("MMEVAL_DIST_BACKEND", "nope")
    with pytest.raises(BackendNotFoundError, match="MMEVAL_DIST_BACKEND"):
        get_dist_backend()


def test_auto_selection_uses_detect_and_logs_once(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="mmeval")
    assert dist.resolve_backend_name("auto") == "non_dist"
    monkeypatch.setenv("MMEVAL_STAR_WORLD_SIZE", "2")
    assert dist.resolve_backend_name() == "star"
    assert dist.resolve_backend_name() == "star"
    chosen = [r for r in caplog.records if "auto-selected" in r.getMessage() and "star" in r.getMessage()]
    assert len(chosen) == 1


def test_metric_built_before_runtime_uses_it_later(monkeypatch):
    from mmeval import Accuracy

    acc = Accuracy()
    assert type(acc.dist_comm).__name__ == "NonDist"
    monkeypatch.setenv("MMEVAL_STAR_WORLD_SIZE", "2")
    assert type(acc.dist_comm).__name__ == "StarDist"


def test_disable_plugins_env(monkeypatch):
    monkeypatch.setenv("MMEVAL_DISABLE_PLUGINS", "star, mmeval-fixture-rival")
    names = list_all_backends()
    assert "star" not in names
    with pytest.raises(BackendNotFoundError, match="MMEVAL_DISABLE_PLUGINS"):
        get_dist_backend("star")
    assert "twin" in names  # the rival is disabled: the name is no longer a conflict
    assert type(get_dist_backend("twin")).__name__ == "StarDist"
    monkeypatch.setenv("MMEVAL_DISABLE_PLUGINS", "mmeval-fixture-plugin")
    assert not {"star", "star_broken"} & set(list_all_backends())


def test_legacy_class_names_resolve_lazily():
    from mmeval.core import dist_backends

    if "torch_cpu" not in MISSING_KNOWN:  # a dev venv with mmeval-torch: the old name resolves to its class
        from mmeval.core.dist_backends import TorchCPUDist

        assert TorchCPUDist.name == "torch_cpu"
        return

    with pytest.raises(ImportError, match="pip install mmeval-torch"):
        from mmeval.core.dist_backends import TorchCPUDist
    with pytest.raises(ImportError, match="mmeval-mpi4py"):
        dist_backends.MPI4PyDist  # noqa: B018
    with pytest.raises(AttributeError):
        dist_backends.NoSuchThing  # noqa: B018
    assert "TFHorovodDist" in dir(dist_backends)


def test_rescan_after_install(tmp_path, monkeypatch):
    """A distribution appearing on sys.path mid-session shows up after refresh."""
    pkg = tmp_path / "latecomer_backend.py"
    pkg.write_text("from mmeval.core.dist_backends import NonDist\nclass Late(NonDist):\n    name = 'late'\n")
    info = tmp_path / "latecomer-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: latecomer\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[mmeval.dist_backends]\nlate = latecomer_backend:Late\n")
    assert "late" not in list_all_backends()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "late" not in list_all_backends()  # cached scan
    assert "late" in list_all_backends(refresh=True)
    assert type(get_dist_backend("late")).__name__ == "Late"
    info_row = {i.name: i for i in dist.backend_infos()}["late"]
    assert info_row.distribution == "latecomer" and info_row.version == "0.1"


def test_core_requirement_check():
    assert satisfies("0.1.0", "mmeval-core>=0.1,<0.2")
    assert not satisfies("0.2.0", "mmeval-core<0.2,>=0.1")
    assert satisfies("0.1.3", "mmeval-core~=0.1.0")
    assert not satisfies("0.2.0", "mmeval-core~=0.1.0")
    assert satisfies("0.1.0", "mmeval-core")
    assert satisfies("0.1.0", "mmeval-core==0.1.*")
    # PEP 440: a pre-release comes before its release
    assert not satisfies("0.1.0rc1", "mmeval-core>=0.1")
    assert satisfies("0.2.0rc1", "mmeval-core>=0.1")
    assert not satisfies("0.1.0.dev3", "mmeval-core>=0.1.0")
    assert not satisfies("0.1.0.post1", "mmeval-core>0.1.0")  # PEP 440: > excludes post-releases
    assert satisfies("0.1.0.post1", "mmeval-core>=0.1.0")
    assert not satisfies("0.1.0+local", "mmeval-core!=0.1.0")
    infos = {i.name: i for i in dist.backend_infos()}
    assert infos["star"].core_requirement == "mmeval-core<0.4,>=0.3"
    assert infos["star"].status == "ok"
