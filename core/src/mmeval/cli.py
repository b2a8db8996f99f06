"""The ``mmeval`` command line: ``mmeval backends [--json] [--check]``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence

from .version import PLUGIN_API_VERSION, __version__

__all__ = ["main"]

_CHECK_SNIPPET = """
import json, sys
from mmeval.core.dist import get_dist_backend_class
cls = get_dist_backend_class(sys.argv[1])
print(json.dumps({"class": cls.__module__ + ":" + cls.__qualname__, "detect": bool(cls.detect())}))
"""


def _check(name: str, timeout: float) -> Dict[str, Any]:
    """Load backend ``name`` in a child process, so a hanging import cannot hang us."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHECK_SNIPPET, name],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"check": "timeout", "check_error": f"loading did not finish within {timeout:g}s"}
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return {"check": "failed", "check_error": lines[-1] if lines else f"exit code {proc.returncode}"}
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"check": "failed", "check_error": f"unexpected output: {proc.stdout[-200:]!r}"}
    return {"check": "ok", "loaded": out["class"], "detect": out["detect"]}


def _backends(args: argparse.Namespace) -> int:
    from .core.dist import backend_infos

    rows: List[Dict[str, Any]] = []
    for info in backend_infos(refresh=True):
        row = info.as_dict()
        if args.check and info.status in ("ok", "incompatible", "failed") and info.source != "builtin":
            row.update(_check(info.name, args.timeout))
            if row["check"] != "ok":
                row["status"] = "failed"
                row["error"] = row["check_error"]
        rows.append(row)
    if args.json:
        print(json.dumps({"mmeval_core": __version__, "plugin_api": PLUGIN_API_VERSION, "backends": rows}, indent=2))
        return 0
    print(f"mmeval-core {__version__} (plugin API {PLUGIN_API_VERSION}); entry-point group mmeval.dist_backends")
    table = [("backend", "status", "distribution", "entry point", "requires")]
    notes: List[str] = []
    for row in rows:
        dist = f"{row['distribution'] or '-'} {row['version'] or ''}".strip()
        if row["status"] == "conflict":
            dist = " | ".join(f"{d} {v}" for d, v, _ in row["providers"])
        table.append((row["name"], row["status"], dist, row["value"], row["core_requirement"] or "-"))
        if row["error"]:
            notes.append(f"  {row['name']}: {row['error']}")
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    for i, r in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 8)
    if notes:
        print("\nnotes:")
        print("\n".join(notes))
    bad = [r for r in rows if r["status"] in ("failed", "conflict", "invalid", "incompatible")]
    return 1 if args.check and bad else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``mmeval`` console script."""
    parser = argparse.ArgumentParser(prog="mmeval", description="mmeval command-line tools")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("backends", help="list the installed distributed backends")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--check", action="store_true", help="load each backend in a child process (with a timeout)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds allowed per backend with --check")
    args = parser.parse_args(argv)
    if args.command == "backends":
        return _backends(args)
    parser.print_help()
    return 2
