#!/usr/bin/env bash
# Installs the benchmark contenders and tools, pinned; idempotent and quiet when all is there.
# Called by `scripts/setup --bench`; can be run on its own.
#
#   wrk 4.1.0-3+b2 (Debian 12)        load generator for bench/emulator_throughput.py
#   gcsfuse v3.11.4 (go install)      -> build/tools/bin/gcsfuse (v3.11.4 is the newest release
#                                        whose go.mod accepts Go 1.26.7+; v3.11.5 wants 1.26.9,
#                                        v3.12+ want Go 1.27; built with GOTOOLCHAIN=local)
#   gcs-torch-dataflux 1.4.0 (PyPI)   the seed connector, into .venv (requirements-connector.txt)
#   torch 2.15.0 + its CUDA libraries into .venv (tests/requirements-torch.txt, which scripts/setup
#                                        already installs; ~5.3 GiB), only so that
#                                        `import dataflux_pytorch` works. Skip with
#                                        FLUXFS_BENCH_TORCH=0 (the listing benchmark needs only
#                                        dataflux_core, which does not import torch).
#
# Environment: VENV (default REPO/.venv), TOOLS_BIN (default REPO/build/tools/bin), GO (default
# go on PATH, else /usr/local/go/bin/go), FLUXFS_BENCH_TORCH=0|1 (default 1).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="$REPO/bench"
VENV="${VENV:-$REPO/.venv}"
TOOLS_BIN="${TOOLS_BIN:-$REPO/build/tools/bin}"
WANT_TORCH="${FLUXFS_BENCH_TORCH:-1}"

WRK_VERSION="4.1.0-3+b2"
GCSFUSE_MODULE="github.com/googlecloudplatform/gcsfuse/v3"
GCSFUSE_VERSION="v3.11.4"

say() { printf 'setup_contenders: %s\n' "$*"; }
die() { printf 'setup_contenders: error: %s\n' "$*" >&2; exit 1; }

# Runs a command quietly; prints its output only if it fails.
quiet() {
    local log
    log="$(mktemp)"
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        die "failed: $*"
    fi
    rm -f "$log"
}

# ---- wrk (apt) ----------------------------------------------------------------------------
if [ "$(dpkg-query -W -f='${Version}' wrk 2>/dev/null || true)" != "$WRK_VERSION" ]; then
    say "installing wrk=$WRK_VERSION"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q "wrk=$WRK_VERSION" >/dev/null 2>&1; then
        quiet apt-get update -q
        quiet apt-get install -y -q "wrk=$WRK_VERSION"
    fi
fi

# ---- gcsfuse (go install) -----------------------------------------------------------------
GCSFUSE_STAMP="$TOOLS_BIN/.gcsfuse-version"
if [ ! -x "$TOOLS_BIN/gcsfuse" ] || [ "$(cat "$GCSFUSE_STAMP" 2>/dev/null)" != "$GCSFUSE_VERSION" ]
then
    GO_BIN="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
    [ -x "$GO_BIN" ] || die "go not found (set GO=/path/to/go)"
    say "building gcsfuse $GCSFUSE_VERSION with $("$GO_BIN" version | cut -d' ' -f3) (a few minutes)"
    mkdir -p "$TOOLS_BIN"
    quiet env GOTOOLCHAIN=local GOBIN="$TOOLS_BIN" GOFLAGS=-buildvcs=false \
        "$GO_BIN" install "$GCSFUSE_MODULE@$GCSFUSE_VERSION"
    echo "$GCSFUSE_VERSION" >"$GCSFUSE_STAMP"
fi

# ---- Python: the seed connector (and torch) -----------------------------------------------
[ -x "$VENV/bin/python" ] || die "no virtual environment at $VENV (run scripts/setup first)"

# True when every name==version line of the requirement files is installed at that version.
pins_satisfied() {
    "$VENV/bin/python" - "$@" <<'PY'
import sys
from importlib import metadata
for path in sys.argv[1:]:
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, version = line.split("==")
        try:
            if metadata.version(name) != version:
                sys.exit(1)
        except metadata.PackageNotFoundError:
            sys.exit(1)
PY
}

pip_pins() { # --no-deps: each file lists the whole closure it needs, pinned
    quiet "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$1"
}

if ! pins_satisfied "$BENCH/requirements-connector.txt"; then
    say "installing gcs-torch-dataflux and its pure-Python deps into $VENV"
    pip_pins "$BENCH/requirements-connector.txt"
    quiet "$VENV/bin/python" -c 'import dataflux_core.fast_list'
fi

# torch: any torch already in the venv (e.g. one scripts/setup installs for the demo) is kept.
if [ "$WANT_TORCH" != "0" ] &&
    ! "$VENV/bin/python" -c 'import importlib.util, sys; sys.exit(not importlib.util.find_spec("torch"))'
then
    say "installing torch 2.15.0 and its CUDA libraries into $VENV (~5.3 GiB)"
    pip_pins "$REPO/tests/requirements-torch.txt"
    quiet "$VENV/bin/python" -c 'import dataflux_pytorch'
fi
