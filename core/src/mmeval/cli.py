"""The ``mmeval`` command line: ``mmeval --version`` and ``mmeval backends [--json] [--check]``.

``mmeval backends --check`` loads each backend in a child process (with a
timeout) and asks the class whether it can run on this machine
(:meth:`~mmeval.core.dist_backends.BaseDistBackend.availability`): a backend
can be installed and loadable yet unusable here (``torch_cuda`` without CUDA,
``torch_horovod`` without a Horovod built for torch). Exit codes with
``--check``: 0 every backend loads and can run here; 1 some backend is broken
(failed to load, conflicting, invalid, incompatible); 3 every backend loads
but some cannot run on this machine. A backend that cannot run only for lack of
the hardware its record names (``torch_cuda`` without CUDA) is reported as
``no-hardware`` and does not change the exit code. Each check runs in a session
of its own, killed as a whole when it ends or times out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .version import __version__

__all__ = ["main", "EXIT_OK", "EXIT_BROKEN", "EXIT_UNUSABLE"]

#: ``mmeval backends --check`` exit codes (argparse itself exits 2 on a usage error).
EXIT_OK, EXIT_BROKEN, EXIT_UNUSABLE = 0, 1, 3

_BROKEN = ("failed", "conflict", "invalid", "incompatible")
_DEFAULT_TIMEOUT = 30.0

_CHECK_SNIPPET = """
import json, sys
from mmeval.core.dist import get_dist_backend_class
cls = get_dist_backend_class(sys.argv[1])
try:
    reason = cls.availability()
except Exception as exc:
    reason = "availability() raised %s: %s" % (type(exc).__name__, exc)
print(json.dumps({"class": cls.__module__ + ":" + cls.__qualname__, "detect": bool(cls.detect()),
                  "unusable_reason": None if reason is None else str(reason)}))
"""


def _run_isolated(argv: List[str], timeout: float) -> Optional[Tuple[int, str, str]]:
    """Run ``argv`` in a session of its own; ``(code, stdout, stderr)``, or None past ``timeout``.

    The whole process group is killed when the child ends or times out, so a
    plugin that starts processes of its own leaves none behind.
    """
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=hasattr(os, "killpg")
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        result: Optional[Tuple[int, str, str]] = (proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        result = None
    if hasattr(os, "killpg"):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if result is None:
        proc.kill()
        proc.communicate()
    return result


def _check(name: str, timeout: float) -> Dict[str, Any]:
    """Load backend ``name`` in a child process (a hanging import cannot hang us) and ask if it can run here.

    Returns ``check`` (``'ok'``, ``'failed'`` or ``'timeout'``), and when it
    loaded: ``loaded``, ``detect``, ``usable`` and ``unusable_reason``.
    """
    done = _run_isolated([sys.executable, "-c", _CHECK_SNIPPET, name], timeout)
    if done is None:
        return {"check": "timeout", "check_error": f"loading did not finish within {timeout:g}s"}
    code, stdout, stderr = done
    if code != 0:
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        return {"check": "failed", "check_error": lines[-1] if lines else f"exit code {code}"}
    try:
        out = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"check": "failed", "check_error": f"unexpected output: {stdout[-200:]!r}"}
    reason = out.get("unusable_reason")
    return {
        "check": "ok",
        "loaded": out["class"],
        "detect": out["detect"],
        "usable": reason is None,
        "unusable_reason": reason,
    }


def _lacks_hardware(row: Dict[str, Any]) -> Optional[str]:
    """What a backend that cannot run here lacks, when its record names hardware (``torch_cuda``: a CUDA GPU).

    Only when its framework is installed: without it, the framework is what is missing.
    """
    from .core.known_backends import KNOWN_BACKENDS
    from .core.launch import framework_state

    record = KNOWN_BACKENDS.get(row["name"])
    if record is None or record.hardware is None or row["distribution"] != record.distribution:
        return None
    if record.framework is not None and framework_state(record.framework) == "missing":
        return None
    return record.hardware


def _positive_seconds(text: str) -> float:
    """``--timeout``'s type: a finite number of seconds > 0 (argparse turns the error into a usage line)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds, not {text!r}")
    return value


def _backends(args: argparse.Namespace) -> int:
    from .core.dist import backend_infos

    rows: List[Dict[str, Any]] = []
    for info in backend_infos(refresh=True):
        row = info.as_dict()
        if args.check:
            row["usable"] = None  # not known: not loaded (builtin rows are usable)
            if info.source == "builtin":
                row["usable"] = True
            elif info.status in ("ok", "incompatible", "failed"):
                row.update(_check(info.name, args.timeout))
                if row["check"] != "ok":
                    row["status"] = "failed"
                    row["error"] = row["check_error"]
                elif not row["usable"] and row["status"] == "ok":
                    hardware = _lacks_hardware(row)
                    row["status"] = "unusable" if hardware is None else "no-hardware"
                    row["error"] = (
                        f"installed and loadable, but cannot run on this machine: {row['unusable_reason']}"
                        if hardware is None
                        else f"needs {hardware}, which this machine lacks: "
                        f"{row['unusable_reason']} (reported, not counted as a failure)"
                    )
        rows.append(row)
    code = EXIT_OK
    note = None
    if args.check:
        if any(r["status"] in _BROKEN for r in rows):
            code = EXIT_BROKEN
        elif any(r["status"] == "unusable" for r in rows):
            code = EXIT_UNUSABLE
        checked = [r for r in rows if "check" in r]
        if checked and all(r["check"] == "timeout" for r in checked):
            note = (
                f"every check timed out: --timeout {args.timeout:g} is likely too short to load a plugin "
                f"(the default is {_DEFAULT_TIMEOUT:g}s)"
            )
    if args.json:
        print(json.dumps({"mmeval_core": __version__, "note": note, "backends": rows}, indent=2))
        return code
    print(f"mmeval-core {__version__}; entry-point group mmeval.dist_backends")
    header = ("backend", "status") + (("usable here",) if args.check else ()) + ("distribution", "entry point")
    table = [header + ("requires",)]
    notes: List[str] = []
    for row in rows:
        dist = f"{row['distribution'] or '-'} {row['version'] or ''}".strip()
        if row["status"] == "conflict":
            dist = " | ".join(f"{d} {v}" for d, v, _ in row["providers"])
        usable: Tuple[str, ...] = ()
        if args.check:
            usable = ({True: "yes", False: "no"}.get(row["usable"], "-"),)
        table.append((row["name"], row["status"]) + usable + (dist, row["value"], row["core_requirement"] or "-"))
        if row["error"]:
            notes.append(f"  {row['name']}: {row['error']}")
    ncols = len(header)
    widths = [max(len(r[i]) for r in table) for i in range(ncols)]
    for i, r in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(r[:ncols], widths)) + "  " + r[ncols])
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 8)
    if notes:
        print("\nnotes:")
        print("\n".join(notes))
    if note is not None:
        print(f"\n{note}")
    if code == EXIT_UNUSABLE:
        print(f"\nevery backend loads, but some cannot run on this machine (exit code {EXIT_UNUSABLE})")
    return code


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``mmeval`` console script (and of ``python -m mmeval``)."""
    parser = argparse.ArgumentParser(prog="mmeval", description="mmeval command-line tools")
    parser.add_argument(
        "--version",
        action="version",
        version=f"mmeval-core {__version__}",
        help="print the version of mmeval-core and exit",
    )
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser(
        "backends",
        help="list the installed distributed backends",
        description="List every discovered dist backend with its distribution, version, entry point, required "
        "mmeval-core range and status.",
        epilog=f"exit codes with --check: {EXIT_OK} all usable here (a backend lacking only its hardware, such as "
        f"torch_cuda without CUDA, is reported but not counted), {EXIT_BROKEN} some backend is broken, "
        f"{EXIT_UNUSABLE} all load but some cannot run on this machine",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--check",
        action="store_true",
        help="load each backend in a child process (with a timeout) and ask whether it can run here",
    )
    p.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=_DEFAULT_TIMEOUT,
        help="seconds allowed to load and ask each backend with --check (default: %(default)gs)",
    )
    args = parser.parse_args(argv)
    if args.command == "backends":
        try:
            code = _backends(args)
            sys.stdout.flush()
        except BrokenPipeError:
            # the reader stopped early (`mmeval backends | head`): no traceback; stdout goes to devnull so the
            # interpreter's own flush at exit cannot raise again, and the status is 1 as Python's docs advise
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 1
        return code
    parser.print_help()
    return 2
