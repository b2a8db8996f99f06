"""Remove a tox env's directory once its commands have run, when the whole-suite run asks for it.

The whole suite (``./tools/run-tox`` with no arguments, which ``.ci/run`` calls)
builds 17 envs of 0.05-1.6 GB each, about 13 GB in all; on a machine with less
free disk than that the later envs fail to even create their virtualenv (CI once
died that way, 808 s in, on ``virtualenv``'s copy of setuptools). ``run-tox``
writes the marker file ``<toxworkdir>/.mmeval-prune`` for such a run, and every
env's ``commands_post`` (tox.ini's ``[testenv]``) calls this script, so an env's
directory goes (all but the few KB of its ``log/``) as soon as it has its verdict and the suite needs the disk of the
envs running at once only (3 by default), not of all of them.

Without the marker (``./tools/run-tox -e NAME``, plain ``tox``, or
``MMEVAL_TOX_KEEP_ENVS=1 ./tools/run-tox``) it does nothing, so envs are reused
as tox reuses them. It never fails the env: a directory it cannot remove is
reported and left.

Usage: python tools/prune_tox_env.py TOX_WORK_DIR ENV_DIR
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import List

MARKER = ".mmeval-prune"


def main(argv: List[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} TOX_WORK_DIR ENV_DIR", file=sys.stderr)
        return 0
    work_dir, env_dir = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    if not os.path.exists(os.path.join(work_dir, MARKER)):
        return 0
    # only ever an env directly under tox's work dir: never the work dir itself or anything outside it
    if os.path.dirname(env_dir) != work_dir or not os.path.isdir(env_dir):
        print(f"prune_tox_env: {env_dir} is not an env of {work_dir}; left as it is", file=sys.stderr)
        return 0
    # everything but log/, where tox writes this very command's log once it ends (tox 4 releases for
    # Python 3.9 fail the env when that directory has gone); removing the interpreter that runs this
    # is fine on POSIX: its files stay open until it exits, and tox runs nothing more from the env
    for name in sorted(os.listdir(env_dir)):
        if name == "log":
            continue
        path = os.path.join(env_dir, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except OSError as exc:
            print(f"prune_tox_env: could not remove {path}: {exc}; left as it is", file=sys.stderr)
    return 0  # quietly: the env's last line stays pytest's summary (tools/tox_summary.py shows it)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
