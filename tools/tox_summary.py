"""Print what a parallel tox run hid, then one closing line per env; exit non-zero on any failure.

``tools/run-tox`` (with no arguments) runs every env of tox.ini side by side
and asks tox for ``--result-json``. tox shows the whole output of a failed env
only; this prints the output of each passing env (grouped, in env order), then
per env its result, seconds and pytest's summary line, and the verdict, so the
log still ends with those lines.

Usage: python tools/tox_summary.py RESULT_JSON TOX_EXIT_CODE
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Dict, List

#: pytest's closing line: "==== 3 failed, 440 passed, 2 skipped in 210.32s (0:03:30) ===="
_PYTEST_SUMMARY = re.compile(
    r"^=+ (.*\b(passed|failed|errors?|skipped|deselected|xfailed|xpassed|no tests ran)\b.*) =+$"
)


def _outputs(env: Dict[str, Any]) -> List[str]:
    return [str(step.get("output", "")) + str(step.get("err", "")) for step in env.get("test", [])]


def closing_line(env: Dict[str, Any]) -> str:
    """pytest's summary line of the env's commands, else the last non-empty line of its output."""
    text = "\n".join(_outputs(env))
    found = [m.group(1) for m in map(_PYTEST_SUMMARY.match, text.splitlines()) if m]
    if found:
        return found[-1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def main(argv: List[str]) -> int:
    path, tox_code = argv[1], int(argv[2])
    try:
        with open(path, encoding="utf-8") as f:
            envs: Dict[str, Dict[str, Any]] = json.load(f).get("testenvs", {})
    except (OSError, ValueError) as exc:
        print(f"run-tox: no tox result to summarize ({exc}); tox exited {tox_code}")
        return tox_code or 1
    # tox lists every env it knows; one that was not selected (TOXENV, -e) has no result
    envs = {name: env for name, env in envs.items() if env.get("result")}
    failed = []
    for name, env in envs.items():
        result = env.get("result", {})
        if result.get("success") and not result.get("skipped") and env.get("test"):
            print(f"\n---------- {name}: output (passed) ----------")
            for out in _outputs(env):
                sys.stdout.write(out if out.endswith("\n") else out + "\n")
    print("\n---------- run-tox: each env ----------")
    for name, env in envs.items():
        result = env.get("result", {})
        if result.get("skipped"):
            state = "SKIP"
        elif result.get("success"):
            state = "OK"
        else:
            state = f"FAIL code {result.get('exit_code')}"
            failed.append(name)
        seconds = float(result.get("duration", 0.0))
        last = closing_line(env)
        print(f"  {name}: {state} in {seconds:.1f} s" + (f" -- {last}" if last else ""))
    if failed or tox_code:
        print(f"  evaluation failed :( ({', '.join(failed) or 'tox exited ' + str(tox_code)})")
        return tox_code or 1
    print("  congratulations :)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
