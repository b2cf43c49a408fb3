#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/, clang, ASan+UBSan) and runs each for SECONDS
# (default 30), starting from the committed seed corpus. New inputs go to a scratch corpus
# (build-fuzz/corpus/TARGET), never into the committed one. Prints one line per target with the
# runs done; exits non-zero when a target crashes, leaks or trips a sanitizer (the reproducer is
# left in build-fuzz/artifacts/). Without clang it says so and exits 0 (scripts/setup installs
# clang and libclang-rt-14-dev, which holds libFuzzer).
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]      e.g. tests/fuzz/run.sh 3600 json-list
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
seconds="${1:-30}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(json-list json-object xml options hint-lines config)

if ! command -v clang >/dev/null; then
    echo "fuzz: clang is not installed; skipping the fuzz targets (scripts/setup installs it)"
    exit 0
fi
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$probe/t.c"
if ! clang -fsanitize=fuzzer "$probe/t.c" -o "$probe/t" >/dev/null 2>&1; then
    echo "fuzz: clang cannot link libFuzzer (on Debian 12: libclang-rt-14-dev); skipping"
    exit 0
fi
if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized >/dev/null
fi
ninja -C build-fuzz >build-fuzz/ninja.log 2>&1 || {
    cat build-fuzz/ninja.log >&2
    echo "fuzz: the fuzz build failed" >&2
    exit 1
}

status=0
mkdir -p build-fuzz/artifacts
for target in "${targets[@]}"; do
    binary="build-fuzz/tests/fuzz/fuzz-$target"
    seeds="tests/fuzz/corpus/$target"
    scratch="build-fuzz/corpus/$target"
    mkdir -p "$scratch"
    log="build-fuzz/fuzz-$target.log"
    # detect_leaks: the parsers must free everything; halt on the first UBSan report too.
    if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$binary" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
        -timeout=10 -artifact_prefix=build-fuzz/artifacts/"$target"- -print_final_stats=1 \
        "$scratch" "$seeds" >"$log" 2>&1; then
        runs="$(grep -o 'Done [0-9]* runs' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')"
        cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')"
        echo "fuzz: $target: $runs runs in ${seconds} s, coverage $cov, no crash"
    else
        status=1
        echo "fuzz: $target FAILED (log: $log, reproducer in build-fuzz/artifacts/)" >&2
        tail -40 "$log" >&2
    fi
done
exit "$status"
