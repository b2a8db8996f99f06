"""No module reads another's private names: the core imports no underscore name of another module, and the code
that syncs metrics reads a metric's underscore members only where a protocol of ``core/sync/protocols.py``
declares them (the extension points a metric overrides).

Checked on the sources' syntax trees. The readers of metrics are ``collection.py``, ``integrations/``,
``core/sync/``, ``core/base_metric.py`` and ``core/results.py``; an underscore attribute of anything but ``self``
/ ``cls`` / ``super()`` counts, unless the module assigns it itself (a marker it sets) or it is a member of a class
the module defines (``base_metric.py`` reads ``BaseMetric``'s own members through its helper functions).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import List, Sequence, Set

SRC = Path(__file__).resolve().parents[3] / "core" / "src"
PACKAGE = SRC / "mmeval"
PROTOCOLS = PACKAGE / "core" / "sync" / "protocols.py"
METRIC_READERS = [
    PACKAGE / "collection.py",
    *sorted((PACKAGE / "integrations").glob("*.py")),
    *sorted((PACKAGE / "core" / "sync").glob("*.py")),
    PACKAGE / "core" / "base_metric.py",
    PACKAGE / "core" / "results.py",
]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def declared_by_protocols() -> Set[str]:
    """The underscore members the protocols of ``core/sync/protocols.py`` declare."""
    names: Set[str] = set()
    for node in ast.parse(PROTOCOLS.read_text()).body:
        if isinstance(node, ast.ClassDef) and any("Protocol" in ast.unparse(b) for b in node.bases):
            names |= {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return {n for n in names if _private(n)}


def private_reads(source: str, allowed: Set[str], own_classes: Sequence[type] = ()) -> List[str]:
    """``line: expr._name`` for each read of an underscore attribute of another object in ``source``."""
    tree = ast.parse(source)
    assigned = {
        t.attr
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and not (isinstance(t.value, ast.Name) and t.value.id in ("self", "cls"))
    }
    own: Set[str] = set()
    for cls in own_classes:
        own |= set(dir(cls))
        own |= {  # instance attributes the module assigns on self
            t.attr
            for node in ast.walk(tree)
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
        }
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)) or isinstance(node.ctx, ast.Store):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        if node.attr in allowed or node.attr in assigned or node.attr in own:
            continue
        found.append(f"{node.lineno}: {ast.unparse(owner)}.{node.attr}")
    return found


def test_the_check_sees_a_private_read() -> None:
    """The check itself: a read of a metric's private member is found, a protocol's extension point is not."""
    code = "def f(metric, computation):\n    computation._state_of_rows(1)\n    return metric._kept\n"
    assert private_reads(code, declared_by_protocols()) == ["3: metric._kept"]


def test_the_readers_of_metrics_read_no_private_member_but_the_protocols() -> None:
    allowed = declared_by_protocols()
    assert "_state_of_rows" in allowed and "_question" in allowed
    offenders = []
    for path in METRIC_READERS:
        source = path.read_text()
        found = private_reads(source, allowed)
        if found:  # a class the module defines may hold them (imported only then: integrations import frameworks)
            module = importlib.import_module(_module_name(path))
            own = [getattr(module, n.name) for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]
            found = private_reads(source, allowed, own)
        offenders += [f"{path.relative_to(SRC)}:{r}" for r in found]
    assert not offenders, "reads of another object's private members:\n" + "\n".join(offenders)


def test_the_core_imports_no_private_name_of_another_module() -> None:
    offenders = []
    for path in sorted([*(PACKAGE / "core").rglob("*.py"), PACKAGE / "collection.py"]):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = path.parent
            for _ in range(max(node.level - 1, 0)):
                base = base.parent
            folder = (base if node.level else SRC).joinpath(*(node.module or "").split("."))
            for alias in node.names:
                is_module = (folder / f"{alias.name}.py").exists() or (folder / alias.name).is_dir()
                if _private(alias.name) and not is_module:
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno} imports {alias.name} from {node.module}")
    assert not offenders, "\n".join(offenders)
