"""No module reads another's private names: no module of the package imports an underscore name of another, and
no module reads an underscore member of another object but where a protocol declares it (the extension points
a metric or a backend overrides).

Checked on the sources' syntax trees, over every module of ``core/src/mmeval``. An underscore attribute of
anything but ``self`` / ``cls`` / ``super()`` counts, unless the module assigns it itself (a marker it sets), it
is a member of a class the module defines (``base_metric.py`` reads ``BaseMetric``'s own members through its
helper functions), or a protocol declares it: one of ``core/sync/protocols.py`` (what the code that syncs
metrics reads of a metric) or one the module itself defines for what it reads (``reduction.py``'s
``FramedReducer``, which mypy holds ``FramedDistBackend`` to). The standard library's documented
underscore functions (``sys._getframe``, ``os._exit``) are public API.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import List, Optional, Sequence, Set

SRC = Path(__file__).resolve().parents[3] / "core" / "src"
PACKAGE = SRC / "mmeval"
PROTOCOLS = PACKAGE / "core" / "sync" / "protocols.py"
MODULES = sorted(PACKAGE.rglob("*.py"))
#: the standard library's underscore names that are its public API: (module, attribute)
STDLIB_PUBLIC = {("sys", "_getframe"), ("os", "_exit")}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def declared_by_protocols(source: Optional[str] = None) -> Set[str]:
    """The underscore members (methods and annotated attributes) the protocols of ``source`` declare.

    ``None``: those of ``core/sync/protocols.py``.
    """
    names: Set[str] = set()
    for node in ast.parse(PROTOCOLS.read_text() if source is None else source).body:
        if isinstance(node, ast.ClassDef) and any("Protocol" in ast.unparse(b) for b in node.bases):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(member.name)
                elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                    names.add(member.target.id)
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
        if isinstance(owner, ast.Name) and (owner.id, node.attr) in STDLIB_PUBLIC:
            continue
        found.append(f"{node.lineno}: {ast.unparse(owner)}.{node.attr}")
    return found


def test_the_check_sees_a_private_read() -> None:
    """The check itself: a read of a metric's private member is found, a protocol's extension point is not."""
    code = "def f(metric, computation):\n    computation._state_of_rows(1)\n    return metric._kept\n"
    assert private_reads(code, declared_by_protocols()) == ["3: metric._kept"]


def test_the_check_takes_a_protocol_the_module_declares() -> None:
    """A module's own protocol declares what it reads (an attribute too); the standard library's names pass."""
    code = (
        "class Host(Protocol):\n    _guard: int\n    def _step(self) -> None: ...\n"
        "def f(host, other):\n    host._step(); sys._getframe(); other._exit()\n    return host._guard + host._x\n"
    )
    assert private_reads(code, declared_by_protocols() | declared_by_protocols(code)) == [
        "5: other._exit",
        "6: host._x",
    ]


def test_no_module_reads_a_private_member_but_the_protocols() -> None:
    common = declared_by_protocols()
    assert "_state_of_rows" in common and "_question" in common
    offenders = []
    for path in MODULES:
        name = str(path.relative_to(SRC))
        source = path.read_text()
        allowed = common | declared_by_protocols(source)
        found = private_reads(source, allowed)
        if found:  # a class the module defines may hold them (imported only then: integrations import frameworks)
            module = importlib.import_module(_module_name(path))
            own = [getattr(module, n.name) for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]
            found = private_reads(source, allowed, own)
        offenders += [f"{name}:{r}" for r in found]
    assert not offenders, "reads of another object's private members:\n" + "\n".join(offenders)


def test_every_module_is_checked() -> None:
    """The COCO modules, the backends, the metrics and the tools are all read (not a chosen list)."""
    names = {str(p.relative_to(SRC)) for p in MODULES}
    assert {
        "mmeval/core/dist_backends/reduction.py",
        "mmeval/metrics/coco_results.py",
        "mmeval/metrics/voc_map.py",
        "mmeval/testing/ranks.py",
        "mmeval/collection.py",
    } <= names


def test_no_module_imports_a_private_name_of_another() -> None:
    offenders = []
    for path in MODULES:
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
