#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 60) on the nightly toolchain,
# installing cargo-fuzz at a pinned version when it is missing. Exits non-zero when a target
# crashes (the input is kept in fuzz/artifacts/<target>/). Not run in CI.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Each run starts from the committed seeds in fuzz/corpus/<target>/ and adds what it finds
# there (new entries are ignored by git). Summary lines: target, executions, corpus entries
# added, crashes.
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2
seconds="${1:-60}"
shift || true
cd "$(dirname "$0")/.."

if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
    echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
    exit 2
fi
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "scripts/fuzz.sh: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
    exit 2
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

# The fuzz crate has its own target folder (instrumented builds share nothing with the
# workspace's).
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/fuzz/target}"
failed=0
summary=()
for target in "${targets[@]}"; do
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus"
    before=$(find "$corpus" -type f | wc -l)
    log="$CARGO_TARGET_DIR/fuzz-$target.log"
    mkdir -p "$CARGO_TARGET_DIR"
    echo "== $target: ${seconds}s (log: $log)"
    extra=()
    # jsonrpc_message keeps a runtime, a server and a session alive across inputs by design;
    # LeakSanitizer would report them at exit.
    if [ "$target" = jsonrpc_message ]; then
        extra=(-detect_leaks=0)
    fi
    status=0
    (cd fuzz && cargo +nightly fuzz run "$target" -- \
        -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
        "${extra[@]}") >"$log" 2>&1 || status=$?
    after=$(find "$corpus" -type f | wc -l)
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    crashes=$(find "fuzz/artifacts/$target" -type f 2>/dev/null | wc -l)
    line="$target: ${execs:-?} execs (budget ${seconds}s), corpus $before -> $after (+$((after - before))), crash files $crashes, exit $status"
    summary+=("$line")
    echo "$line"
    if [ "$status" -ne 0 ]; then
        failed=1
        tail -40 "$log" >&2
    fi
done
echo
printf '%s\n' "${summary[@]}"
exit "$failed"
