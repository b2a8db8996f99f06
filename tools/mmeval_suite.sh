#!/usr/bin/env bash
# MMEval 0.2.1's own tests/test_metrics/ (with its data/ and test_utils/), run verbatim against the mmeval
# installed for $PYTHON, with passed / failed / skipped / errors per file. Not part of the README's test
# command: an acceptance check of issue 22 ("what MMEval's own tests check holds here").
#
#   tools/mmeval_suite.sh [SOURCE] [TEST_FILE ...]
#
# SOURCE: a git dir of MMEval (bare or a checkout's .git) holding tag $MMEVAL_TAG (default v0.2.1); a checkout
# (a directory with tests/test_metrics); or a .tar.gz of the source tree (GitHub's tag archive). Default:
# $MMEVAL_GIT_DIR. (PyPI's mmeval-0.2.1.tar.gz ships no tests, so `pip download` cannot supply them.)
# TEST_FILE: file names under tests/test_metrics (default: all of them, test_utils/ included).
# PYTHON (default: python) must have mmeval and pytest installed; torch and the extras make fewer tests skip.
# The tests run in a temporary directory (removed afterwards; KEEP=1 keeps it), with no pytest configuration
# of this project. Exit status: pytest's (0 when nothing failed).
set -euo pipefail

PYTHON=${PYTHON:-python}
TAG=${MMEVAL_TAG:-v0.2.1}
SOURCE=${1:-${MMEVAL_GIT_DIR:-}}
[ $# -gt 0 ] && shift
if [ -z "$SOURCE" ]; then
    echo "usage: $0 SOURCE [TEST_FILE ...]  (SOURCE: MMEval git dir, checkout or source .tar.gz; or set MMEVAL_GIT_DIR)" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/mmeval-suite.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $work" >&2; else trap 'rm -rf "$work"' EXIT; fi

if [ -d "$SOURCE/tests/test_metrics" ]; then
    mkdir -p "$work/tests" && cp -R "$SOURCE/tests/test_metrics" "$work/tests/"
elif [ -d "$SOURCE" ] && git --git-dir="$SOURCE" rev-parse --verify --quiet "$TAG^{commit}" >/dev/null; then
    git --git-dir="$SOURCE" archive "$TAG" tests/test_metrics | tar -x -C "$work"
elif [ -f "$SOURCE" ] && [[ "$SOURCE" == *.tar.gz || "$SOURCE" == *.tgz ]]; then
    mkdir -p "$work/src" && tar -xzf "$SOURCE" -C "$work/src"
    found=$(find "$work/src" -type d -path '*/tests/test_metrics' | head -n 1)
    if [ -z "$found" ]; then
        echo "$SOURCE holds no tests/test_metrics (PyPI's sdist ships none): pass MMEval's git dir or GitHub's tag archive" >&2
        exit 2
    fi
    mkdir -p "$work/tests" && mv "$found" "$work/tests/"
else
    echo "$SOURCE is neither a git dir with $TAG, a checkout with tests/test_metrics, nor a .tar.gz" >&2
    exit 2
fi

# from the root of the extracted tree, as MMEval's CI runs its tests: some read tests/test_metrics/data/...
cd "$work"
targets=()
for f in "$@"; do targets+=("tests/test_metrics/$f"); done
[ ${#targets[@]} -eq 0 ] && targets=(tests/test_metrics)
echo "MMEval $TAG tests/test_metrics from $SOURCE, against: $("$PYTHON" -c 'import mmeval, os; print(mmeval.__version__, os.path.dirname(mmeval.__file__))')"
status=0
"$PYTHON" -m pytest -q -p no:cacheprovider -c /dev/null --rootdir . -rfE --continue-on-collection-errors -o junit_family=xunit1 \
    --junitxml="$work/junit.xml" "${targets[@]}" >"$work/pytest.log" 2>&1 || status=$?
if [ ! -s "$work/junit.xml" ]; then
    cat "$work/pytest.log"
    exit "$status"
fi
"$PYTHON" - "$work/junit.xml" <<'EOF'
"""Per-file counts from pytest's JUnit XML (xunit1: each test case names its file)."""
import collections
import sys
import xml.etree.ElementTree as ET

counts = collections.defaultdict(collections.Counter)
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    name = case.get("file") or (case.get("classname") or "?").replace(".", "/") + ".py"
    kinds = {child.tag for child in case}
    kind = "failed" if "failure" in kinds else "error" if "error" in kinds else "skipped" if "skipped" in kinds \
        else "passed"
    counts[name][kind] += 1
total = collections.Counter()
print(f"{'file':60} {'passed':>7} {'failed':>7} {'skipped':>8} {'error':>6}")
for name in sorted(counts):
    c = counts[name]
    total.update(c)
    print(f"{name:60} {c['passed']:7} {c['failed']:7} {c['skipped']:8} {c['error']:6}")
print(f"{'TOTAL':60} {total['passed']:7} {total['failed']:7} {total['skipped']:8} {total['error']:6}")
EOF
if [ "$status" -ne 0 ]; then
    echo
    grep -E '^(FAILED|ERROR) ' "$work/pytest.log" || tail -n 30 "$work/pytest.log"
fi
exit "$status"
