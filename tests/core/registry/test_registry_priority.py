"""Auto-selection order comes from each backend class's ``priority`` (issue 12, item 8), and one disable list.

The fixture distributions are pip-installed: ``mmeval-fixture-rival`` ships ``summit`` and ``apex``
(priority 100, active with ``MMEVAL_SUMMIT_ACTIVE=1`` / ``MMEVAL_APEX_ACTIVE=1``), ``mmeval-fixture-plugin``
ships ``star`` (priority 0, active with ``MMEVAL_STAR_WORLD_SIZE>1``).
"""

from __future__ import annotations

import json
import pathlib

from test_registry import run_py  # tests/core is on sys.path (conftest)

from mmeval.core import dist
from mmeval.core.dist import get_dist_backend, list_all_backends, register_dist_backend, resolve_backend_name
from mmeval.core.dist_backends import BaseDistBackend, NonDist

REPO = pathlib.Path(__file__).resolve().parents[3]
PLUGIN_SRC = [REPO / "plugins" / p / "src" for p in ("torch_backend", "mpi_backend", "horovod_backend")]


def test_priority_is_a_class_attribute_defaulting_to_zero():
    assert BaseDistBackend.priority == 0
    assert NonDist.priority == 0
    assert not hasattr(dist, "AUTO_PRIORITY")  # the order is no longer the core's list of in-tree names


def test_a_third_party_backend_with_a_higher_priority_wins(monkeypatch):
    monkeypatch.setenv("MMEVAL_STAR_WORLD_SIZE", "2")
    assert resolve_backend_name("auto") == "star"  # the only active runtime
    monkeypatch.setenv("MMEVAL_SUMMIT_ACTIVE", "1")
    # star sorts first by name, but summit's class says priority 100
    assert resolve_backend_name("auto") == "summit"
    assert type(get_dist_backend()).__name__ == "SummitDist"


def test_equal_priorities_go_by_name(monkeypatch):
    monkeypatch.setenv("MMEVAL_SUMMIT_ACTIVE", "1")
    monkeypatch.setenv("MMEVAL_APEX_ACTIVE", "1")
    assert resolve_backend_name("auto") == "apex"
    monkeypatch.delenv("MMEVAL_APEX_ACTIVE")
    assert resolve_backend_name("auto") == "summit"


def test_inactive_runtimes_never_win_whatever_their_priority(monkeypatch):
    assert resolve_backend_name("auto") == "non_dist"
    monkeypatch.setenv("MMEVAL_STAR_WORLD_SIZE", "2")
    assert resolve_backend_name("auto") == "star"


def test_a_registered_backend_ranks_by_its_priority(monkeypatch):
    class Outranking(NonDist):
        priority = 1000

        @classmethod
        def detect(cls) -> bool:
            return True

    monkeypatch.setenv("MMEVAL_SUMMIT_ACTIVE", "1")
    register_dist_backend("zzz_mine", Outranking)
    assert resolve_backend_name("auto") == "zzz_mine"


def test_in_tree_priorities_order_the_repository_backends():
    """torch_cuda > torch_cpu > torch_horovod = tf_horovod > mpi4py > a third party's default; no framework imported."""
    out = run_py(f"""
        import json, sys
        sys.path[:0] = {[str(p) for p in PLUGIN_SRC]!r}
        from mmeval_torch import TorchCPUDist, TorchCUDADist
        from mmeval_mpi4py import MPI4PyDist
        from mmeval_horovod import TFHorovodDist, TorchHorovodDist
        classes = [TorchCUDADist, TorchCPUDist, TorchHorovodDist, TFHorovodDist, MPI4PyDist]
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "mpi4py", "horovod", "tensorflow"))
        print(json.dumps({{"p": {{c.name: c.priority for c in classes}}, "heavy": heavy}}))
    """)
    data = json.loads(out)
    p = data["p"]
    assert p["torch_cuda"] > p["torch_cpu"] > p["torch_horovod"] == p["tf_horovod"] > p["mpi4py"] > 0
    assert data["heavy"] == []


def test_disable_list_is_normalised_once_for_backends_and_hooks():
    """``MMEval_Fixture.Rival`` disables the distribution mmeval-fixture-rival in the registry *and* the hooks."""
    out = run_py(
        """
        import json, sys
        from mmeval.core import dist, hooks
        from mmeval.core._metadata import is_disabled, disabled_plugins, entry_points_in_group
        hooks_on = hooks._decide()
        print(json.dumps({
            "names": dist.list_all_backends(),
            "recorder_loaded": "mmeval_fixture_rival.recorder" in sys.modules,
            "disabled": sorted(disabled_plugins()),
            "star_disabled": [is_disabled(ep) for ep in entry_points_in_group("mmeval.dist_backends")
                              if ep.name == "star"],
        }))
    """,
        MMEVAL_DISABLE_PLUGINS=" MMEval_Fixture.Rival ,STAR",
    )
    data = json.loads(out)
    assert data["disabled"] == ["mmeval-fixture-rival", "star"]
    assert not {"summit", "apex", "nodevice", "star"} & set(data["names"])
    assert "twin" in data["names"]  # the rival's claim is gone: no conflict left
    assert data["recorder_loaded"] is False  # the rival's hook plugin is disabled too
    assert data["star_disabled"] == [True]
    # and the same hook plugin loads when nothing is disabled
    out = run_py("""
        import sys
        from mmeval.core import hooks
        hooks._decide()
        print("mmeval_fixture_rival.recorder" in sys.modules)
    """)
    assert out.strip() == "True"


def test_auto_selection_skips_a_broken_plugin_and_lists_all(monkeypatch):
    monkeypatch.setenv("MMEVAL_SUMMIT_ACTIVE", "1")
    ranked = [name for _p, name, _c in dist._registry.auto.candidates(dist._registry)]
    assert ranked[:2] == ["apex", "summit"] and "star_broken" not in ranked and "non_dist" not in ranked
    assert "star" in ranked and ranked.index("star") > ranked.index("summit")
    assert list_all_backends() == sorted(list_all_backends())
