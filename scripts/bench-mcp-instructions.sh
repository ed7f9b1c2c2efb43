#!/usr/bin/env bash
# bench-mcp-instructions.sh: the MCP-over-HTTP benchmark counted in CPU instructions instead of
# seconds. Runs the two bare rmcp floors and `toolgate serve --http` under valgrind's callgrind,
# sends the same `tools/call books_get {"ids":[1]}` load as scripts/bench-mcp.sh, and prints the
# server's user-space instructions per call for each, and the ratios, measured in the same run.
# The floors: `bare`, whose books_get answers a constant, and `same-work`, whose books_get does
# toolgate's books-v2 books_get work with the same code (the same SQLite read and row JSON,
# called directly, no dispatcher: bare-rmcp-server --books-db). The ratio against the same-work
# floor is what toolgate's own stack costs; against the constant floor, that plus the work.
#
# Why: req/s on a shared 2-core VM moves by 10-40% between runs, so a change of a few percent
# cannot be seen in it. An instruction count is the same whatever else the machine does (a
# running eval or build changes it by well under 1%), so it shows what a change to the call
# path costs or saves. It counts user-space instructions only: system calls, cache misses and
# wake-ups are not in it, so the req/s ratio of scripts/bench-mcp.sh stays the measure of the
# goal; this one explains it. With TOP=N it also lists the N functions whose own instructions per
# call differ most between the same-work floor and toolgate (where toolgate's extra work is).
#
# Instrumentation is off during start-up and warm-up and on only for the measured window; the
# count is divided by the calls the load client completed in it (calls in flight at either edge
# make this exact to well under 1% at a few thousand calls).
#
# Environment (all optional): REVISIONS (default "2025-11-25 2026-07-28"), CONNS (default 8),
# DURATION (measured seconds under valgrind, default 8; about 400 calls a second get through),
# TOP (default 0), TOOLGATE (default target/release/toolgate), TOOLGATE_CONFIG (a toolgate.toml
# the server runs with, e.g. one with [telemetry]; default none), BENCH_DIR (scratch, default
# target/mcp-bench). Needs valgrind (Debian package `valgrind`) and a release build of toolgate.
# Every server binds 127.0.0.1 and is stopped when its row is done (and on exit).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REVISIONS=${REVISIONS:-"2025-11-25 2026-07-28"}
CONNS=${CONNS:-8}
DURATION=${DURATION:-8}
TOP=${TOP:-0}
RELEASE=$ROOT/target/release
TOOLGATE=${TOOLGATE:-$RELEASE/toolgate}
BENCH_DIR=${BENCH_DIR:-$ROOT/target/mcp-bench}
SERVER_LIMIT_S=600

BENCH_NAME=bench-mcp-instructions
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

command -v valgrind >/dev/null || die "valgrind is missing: apt-get install valgrind"
command -v callgrind_control >/dev/null || die "callgrind_control (valgrind) is missing"
[ -x "$TOOLGATE" ] || die "no $TOOLGATE: build it with cargo build --release -p toolgate"
mkdir -p "$BENCH_DIR"
log "== building the load client and the bare rmcp server (release)"
cargo build --release --locked -p toolgate-mcp-bench >&2



load() { # REVISION URL CONNS WARMUP DURATION
  "$RELEASE/mcp-load" --url "$2" --revision "$1" --conns "$3" --warmup "$4" --duration "$5" \
    --tool books_get --arguments '{"ids":[1]}'
}


# measure SERVER REVISION CONNS OUTFILE: sets M_CALLS (calls completed in the measured window),
# M_IR (the server's instructions in it) and M_DUMP (callgrind's file).
measure() {
  local server=$1 rev=$2 conns=$3 out=$4 port cmd result calls
  log "== $rev, $conns conns: $server under callgrind"
  port=$(free_port)
  case $server in
  bare) cmd=("$RELEASE/bare-rmcp-server" --port "$port" --max-seconds $SERVER_LIMIT_S) ;;
  same-work)
    rm -f "$BENCH_DIR/instructions-same-work-books.db"
    cmd=("$RELEASE/bare-rmcp-server" --port "$port" --max-seconds $SERVER_LIMIT_S
      --books-db "$BENCH_DIR/instructions-same-work-books.db")
    ;;
  toolgate)
    # A fresh store and audit file: an audit grown by earlier runs costs more per row.
    rm -f "$BENCH_DIR/instructions-books.db"* "$BENCH_DIR/instructions-audit.sqlite"*
    cmd=("$TOOLGATE")
    [ -n "${TOOLGATE_CONFIG:-}" ] && cmd+=(--config "$TOOLGATE_CONFIG")
    cmd+=(serve --http "127.0.0.1:$port" --toolset books-v2 --db "$BENCH_DIR/instructions-books.db"
      --audit-db "$BENCH_DIR/instructions-audit.sqlite")
    ;;
  esac
  rm -f "$out" "$out".*
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "${cmd[@]}" \
    >"$BENCH_DIR/instructions-$server.log" 2>&1 &
  PID=$!
  local up=""
  for _ in $(seq 600); do
    kill -0 "$PID" 2>/dev/null || break
    if (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; then up=1; break; fi
    sleep 0.1
  done
  [ -n "$up" ] || die "$server did not start under valgrind: $(tail -c 300 "$BENCH_DIR/instructions-$server.log")"
  local url=http://127.0.0.1:$port/mcp
  load "$rev" "$url" "$conns" 1 3 >/dev/null || die "$server: the warm-up load failed"
  callgrind_control -i on "$PID" >/dev/null
  result=$(load "$rev" "$url" "$conns" 0 "$DURATION") || die "$server: the load failed: $result"
  callgrind_control -i off "$PID" >/dev/null
  callgrind_control -d "$PID" >/dev/null
  stop_server
  calls=$(field ok "$result")
  [ "$(field failed "$result")" = 0 ] || die "$server: failed calls: $result"
  [ -n "$calls" ] && [ "$calls" -gt 0 ] || die "$server: no call completed: $result"
  # The dump made on request is the file with the highest part number.
  local dump
  dump=$(ls -v "$out".* 2>/dev/null | tail -1)
  [ -n "$dump" ] || die "$server: callgrind wrote no dump"
  M_CALLS=$calls
  M_IR=$(awk '$1 == "totals:" { print $2 }' "$dump")
  M_DUMP=$dump
}

echo
echo "MCP Streamable HTTP, tools/call books_get {\"ids\":[1]}, user-space instructions per call under"
echo "callgrind (${DURATION}s measured after a 3s warm-up); a ratio = a floor's instructions per call over"
echo "toolgate's, measured in this run (comparable to a req/s ratio of two CPU-bound servers); x same-work"
echo "is the goal's (at least 0.90x), x bare the constant floor's."
printf '%-11s %5s %15s %19s %19s %10s %7s\n' revision conns "bare rmcp" "same-work floor" "toolgate" "x same-work" "x bare"
for rev in $REVISIONS; do
  for c in $CONNS; do
    measure bare "$rev" "$c" "$BENCH_DIR/callgrind-bare-$rev-$c.out"
    bare_calls=$M_CALLS bare_ir=$M_IR
    measure same-work "$rev" "$c" "$BENCH_DIR/callgrind-same-work-$rev-$c.out"
    same_calls=$M_CALLS same_ir=$M_IR same_dump=$M_DUMP
    measure toolgate "$rev" "$c" "$BENCH_DIR/callgrind-toolgate-$rev-$c.out"
    tg_calls=$M_CALLS tg_ir=$M_IR tg_dump=$M_DUMP
    python3 - "$rev" "$c" "$bare_calls" "$bare_ir" "$same_calls" "$same_ir" "$tg_calls" "$tg_ir" <<'PY'
import sys
rev, conns, bc, bi, sc, si, tc, ti = sys.argv[1:]
bare, same, tg = int(bi) / int(bc), int(si) / int(sc), int(ti) / int(tc)
print(f"{rev:<11} {conns:>5} {bare:>10,.0f} Ir/call {same:>10,.0f} Ir/call {tg:>10,.0f} Ir/call"
      f" {same / tg:>10.2f}x {bare / tg:>6.2f}x")
PY
    if [ "$TOP" -gt 0 ]; then
      python3 - "$same_dump" "$same_calls" "$tg_dump" "$tg_calls" "$TOP" <<'PY'
import re, subprocess, sys
def self_cost(path, calls):
    text = subprocess.run(["callgrind_annotate", "--threshold=100", path],
                          capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(?:\?\?\?:)?(.*?) \[", line)
        if m:
            name = re.sub(r"'\d+$", "", m.group(2))
            costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", "")) / calls
    return costs
bare = self_cost(sys.argv[1], int(sys.argv[2]))
tg = self_cost(sys.argv[3], int(sys.argv[4]))
rows = sorted(set(bare) | set(tg), key=lambda k: -abs(tg.get(k, 0) - bare.get(k, 0)))
print(f"    {'floor':>8} {'toolgate':>8} {'extra':>8}  function (own instructions per call; floor: same-work)")
for name in rows[: int(sys.argv[5])]:
    b, t = bare.get(name, 0), tg.get(name, 0)
    print(f"    {b:>8,.0f} {t:>8,.0f} {t - b:>+8,.0f}  {name[:110]}")
PY
    fi
  done
done
