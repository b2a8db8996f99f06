#!/usr/bin/env bash
# Build Horovod 0.28.1 from source, with Gloo and without MPI, for ONE framework,
# into the current Python environment (a tox env, or any venv).
#
#   bash tools/build_horovod.sh torch        # horovod.torch over torch==2.13.0
#   bash tools/build_horovod.sh tensorflow   # horovod.tensorflow over tensorflow-cpu==2.13.1
#
# Idempotent: when `horovodrun --check-build` of this environment already shows
# the flavour and Gloo, nothing is built (so tox builds once per env creation).
#
# Why each step (see plugins/horovod_backend/README.md):
# * horovod 0.28.1 is the last release and ships only an sdist; it compiles
#   against the framework's headers, so the framework is installed first and
#   pip builds without isolation (--no-build-isolation).
# * horovod's CMake forces C++14 for the torch and gloo targets (-std=c++14,
#   gloo's -std=c++11), but torch >= 2.1 headers refuse anything below C++17.
#   A compiler wrapper, written by this script into a temporary directory and
#   given to CMake as CXX, rewrites every -std=c++11/14 (and gnu++) to
#   -std=c++17 -- wherever the flag comes from -- and drops debug info (-g0),
#   which shortens the build and shrinks the libraries.
# * CMake >= 4 refuses the bundled gloo's cmake_minimum_required(2.8.12)
#   without CMAKE_POLICY_VERSION_MINIMUM=3.5.
# * pip caches a wheel it built from an sdist by the sdist alone, not by the
#   HOROVOD_* variables: a torch-flavoured wheel would silently be reused for
#   TensorFlow. Hence --no-cache-dir.
# * TensorFlow is pinned to 2.13.1: newer TF wheels' headers reference
#   highwayhash/farmhash and XLA paths that horovod 0.28.1 does not know.
#
# * The built wheel is kept in a cache of this script's own
#   (HOROVOD_WHEEL_CACHE, default ~/.cache/mmeval/horovod-wheels), under a key
#   made of everything the build depends on: this script's text, the flavour,
#   the framework's installed version, the Python ABI, the platform and the
#   compiler's version. A later env with the same key installs that wheel
#   instead of compiling (~9 min of 2 cores each); the check below still has to
#   pass, else the wheel is dropped and Horovod built. A fresh machine builds.
#
# Environment: HOROVOD_BUILD_PYTHON (default: `python` on PATH, the tox env's),
# HOROVOD_BUILD_JOBS (default: the number of CPUs), HOROVOD_BUILD_FORCE=1
# (rebuild even when a working build or a cached wheel is present),
# HOROVOD_WHEEL_CACHE (the wheel cache's folder; empty: no cache).
set -euo pipefail

HOROVOD_VERSION=0.28.1
TORCH_REQ="torch==2.13.0"
TF_REQ="tensorflow-cpu==2.13.1"

flavour="${1:-}"
case "$flavour" in
    torch|pytorch) flavour=torch; framework_req="$TORCH_REQ"; framework_label="PyTorch" ;;
    tensorflow|tf) flavour=tensorflow; framework_req="$TF_REQ"; framework_label="TensorFlow" ;;
    *)
        echo "usage: $0 torch|tensorflow" >&2
        exit 2
        ;;
esac

PY="${HOROVOD_BUILD_PYTHON:-python}"
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "build_horovod: no Python interpreter '$PY' on PATH (set HOROVOD_BUILD_PYTHON)" >&2
    exit 2
fi
PY="$(command -v "$PY")"
BIN_DIR="$(dirname "$PY")"
ENV_PREFIX="$("$PY" -c 'import sys; print(sys.prefix)')"
PIP=("$PY" -m pip)

# --- is a working build of this flavour already here? ----------------------
check_build() {
    # horovodrun lives next to the interpreter; it must report the framework and Gloo.
    local hvdrun="$BIN_DIR/horovodrun" out
    [[ -x "$hvdrun" ]] || return 1
    out="$(timeout 120 "$hvdrun" --check-build 2>&1)" || return 1
    grep -Eq "\[X\] ${framework_label}\b" <<<"$out" || return 1
    grep -Eq "\[X\] Gloo\b" <<<"$out" || return 1
    grep -Eq "^Horovod v${HOROVOD_VERSION//./\\.}:" <<<"$out" || return 1
    return 0
}

if [[ "${HOROVOD_BUILD_FORCE:-0}" != 1 ]] && check_build; then
    echo "build_horovod: horovod ${HOROVOD_VERSION} with ${framework_label} and Gloo is already built in ${ENV_PREFIX}; skipping the build"
    exit 0
fi

start=$(date +%s)
echo "build_horovod: building horovod ${HOROVOD_VERSION} for ${framework_label} (Gloo, no MPI) in ${ENV_PREFIX}"

# --- framework first, then the build tools (no isolation: they must be here) -
timeout 1800 "${PIP[@]}" install --disable-pip-version-check "$framework_req"
timeout 600 "${PIP[@]}" install --disable-pip-version-check \
    "setuptools>=64" wheel packaging cloudpickle psutil pyyaml

# --- a C++17 compiler wrapper ------------------------------------------------
workdir="$(mktemp -d "${TMPDIR:-/tmp}/build_horovod.XXXXXX")"
trap 'rm -rf "$workdir"' EXIT

real_cxx="${CXX:-}"
if [[ -z "$real_cxx" ]]; then
    real_cxx="$(command -v g++ || command -v c++ || true)"
fi
if [[ -z "$real_cxx" ]]; then
    echo "build_horovod: no C++ compiler (g++ / c++) found; install one (Debian: apt-get install g++)" >&2
    exit 1
fi
if ! command -v cmake >/dev/null 2>&1; then
    # horovod's setup.py would otherwise try to pip-install cmake~=3.13 into a temp dir
    timeout 600 "${PIP[@]}" install --disable-pip-version-check "cmake>=3.13"
fi

wrapper="$workdir/cxx17"
cat >"$wrapper" <<EOF
#!/usr/bin/env bash
# Written by tools/build_horovod.sh: force C++17 and no debug info for horovod's build.
args=()
for a in "\$@"; do
    case "\$a" in
        -std=c++11|-std=c++14|-std=c++1y|-std=gnu++11|-std=gnu++14|-std=gnu++1y) args+=(-std=c++17) ;;
        *) args+=("\$a") ;;
    esac
done
exec "$real_cxx" "\${args[@]}" -g0
EOF
chmod +x "$wrapper"

jobs="${HOROVOD_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
log="$workdir/build.log"

build_env=(
    CXX="$wrapper"
    MAKEFLAGS="-j${jobs}"
    CMAKE_POLICY_VERSION_MINIMUM=3.5
    HOROVOD_WITH_GLOO=1
    HOROVOD_WITHOUT_MPI=1
    HOROVOD_WITHOUT_MXNET=1
)
if [[ "$flavour" == torch ]]; then
    build_env+=(HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1)
else
    build_env+=(HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1)
fi

# a previous build of another flavour (or a broken one) must not survive
"${PIP[@]}" uninstall --disable-pip-version-check -y horovod >/dev/null 2>&1 || true

# --- a wheel built before with the same inputs? --------------------------------
cache_root="${HOROVOD_WHEEL_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/mmeval/horovod-wheels}"
cache_dir=""
if [[ -n "$cache_root" ]]; then
    framework_version="$("${PIP[@]}" show "${framework_req%%==*}" 2>/dev/null | awk '/^Version:/ {print $2}')"
    key="$(
        {
            cat "$0"
            echo "$flavour $framework_version"
            "$PY" -c 'import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_platform())'
            "$real_cxx" --version | head -n 1
        } | sha256sum | cut -c1-16
    )"
    cache_dir="$cache_root/${HOROVOD_VERSION}-${flavour}-${key}"
    if [[ "${HOROVOD_BUILD_FORCE:-0}" != 1 ]] && compgen -G "$cache_dir/horovod-*.whl" >/dev/null; then
        echo "build_horovod: installing the wheel built before with the same inputs ($cache_dir)"
        if "${PIP[@]}" install --disable-pip-version-check "$cache_dir"/horovod-*.whl >"$log" 2>&1 && check_build; then
            end=$(date +%s)
            echo "build_horovod: horovod ${HOROVOD_VERSION} (${framework_label}, Gloo) installed from the cache in $((end - start)) s"
            exit 0
        fi
        cat "$log" >&2
        echo "build_horovod: the cached wheel did not give a working build; dropping it and building" >&2
        rm -rf "$cache_dir"
        "${PIP[@]}" uninstall --disable-pip-version-check -y horovod >/dev/null 2>&1 || true
    fi
fi

echo "build_horovod: ${build_env[*]}"
echo "build_horovod: compiling (log: $log; printed in full on failure)"
wheels="$workdir/wheels"
set +e
env "${build_env[@]}" timeout 3000 "${PIP[@]}" wheel --disable-pip-version-check -v --no-deps \
    --no-build-isolation --no-cache-dir --no-binary horovod -w "$wheels" "horovod==${HOROVOD_VERSION}" >"$log" 2>&1 &&
    "${PIP[@]}" install --disable-pip-version-check "$wheels"/horovod-*.whl >>"$log" 2>&1
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
    cat "$log" >&2
    echo "build_horovod: building or installing horovod==${HOROVOD_VERSION} failed (exit $rc)" >&2
    exit "$rc"
fi
grep -E "^(Successfully installed|Requirement already satisfied: horovod)" "$log" || true

if ! check_build; then
    timeout 120 "$BIN_DIR/horovodrun" --check-build >&2 || true
    echo "build_horovod: the build finished but horovodrun --check-build does not show ${framework_label} and Gloo" >&2
    exit 1
fi
if [[ -n "$cache_dir" ]]; then
    # the folder appears whole or not at all: a killed copy leaves no half wheel behind
    mkdir -p "$cache_root"
    staging="$(mktemp -d "$cache_root/.incoming.XXXXXX")"
    cp "$wheels"/horovod-*.whl "$staging"/
    rm -rf "$cache_dir"
    mv "$staging" "$cache_dir" || rm -rf "$staging"
    echo "build_horovod: wheel kept in $cache_dir for the next env with the same inputs"
fi
end=$(date +%s)
echo "build_horovod: horovod ${HOROVOD_VERSION} (${framework_label}, Gloo) built in $((end - start)) s wall time"
