#!/usr/bin/env bash
# bench-mcp-stdio.sh: the MCP-over-stdio benchmark, a desktop host's case: one session on the
# server's stdin/stdout, one `tools/call books_get {"ids":[1]}` in flight at a time. Measures
# calls per second, p50/p99 latency and the server's peak RSS (and its own, anonymous part) for toolgate (`serve --toolset
# books-v2`, stdio) and the two bare rmcp floors over rmcp's own stdio transport (`bare`:
# books_get answers a constant; `same-work`: the same SQLite read and row JSON as books-v2's,
# no dispatcher), and prints toolgate's ratios to the same-work floor measured in the same round.
#
# Each round runs the three servers one after another (so a disturbance hits one round, not one
# server), ROUNDS times; the summary gives the median of the rounds' ratios and their spread.
# The server runs on core 0 (taskset -c 0), the load client on core 1. Each server is the load
# client's child: it starts it, ends the session by closing stdin, and kills it if it stays.
#
# Environment (all optional): ROUNDS (default 3), REVISIONS (default "2025-11-25 2026-07-28"),
# WARMUP (s, default 2), DURATION (s, default 5), BENCH_DIR (scratch, default target/mcp-bench),
# TOOLGATE (default target/release/toolgate). Needs a release build of toolgate.
#
# Exits 0 when every run was clean (the goal lines are informational); non-zero when a build
# failed, a server did not run, or a measured run had failures.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-3}
REVISIONS=${REVISIONS:-"2025-11-25 2026-07-28"}
WARMUP=${WARMUP:-2}
DURATION=${DURATION:-5}
RELEASE=$ROOT/target/release
TOOLGATE=${TOOLGATE:-$RELEASE/toolgate}
BENCH_DIR=${BENCH_DIR:-$ROOT/target/mcp-bench}
SERVER_LIMIT_S=600

BENCH_NAME=bench-mcp-stdio
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

[ "$(nproc)" -ge 2 ] || die "needs 2 cores (server on core 0, client on core 1)"
command -v taskset >/dev/null || die "taskset (util-linux) is missing"
[ -x "$TOOLGATE" ] || die "no $TOOLGATE: build it with cargo build --release -p toolgate"
case $ROUNDS in '' | *[!0-9]* | 0) die "ROUNDS must be a whole number above 0, not '$ROUNDS'" ;; esac
mkdir -p "$BENCH_DIR"
log "== building the stdio load client and the bare rmcp server (release)"
cargo build --release --locked -p toolgate-mcp-bench >&2

# run_one SERVER REVISION: the load client's output line for SERVER over stdio.
run_one() {
  local server=$1 rev=$2 cmd
  case $server in
  bare) cmd=("$RELEASE/bare-rmcp-server" --stdio --max-seconds $SERVER_LIMIT_S) ;;
  same-work)
    rm -f "$BENCH_DIR/stdio-same-work-books.db"*
    cmd=("$RELEASE/bare-rmcp-server" --stdio --max-seconds $SERVER_LIMIT_S
      --books-db "$BENCH_DIR/stdio-same-work-books.db")
    ;;
  toolgate)
    # A fresh store and audit file every run: an audit grown by earlier runs costs more.
    rm -f "$BENCH_DIR/stdio-books.db"* "$BENCH_DIR/stdio-audit.sqlite"*
    cmd=("$TOOLGATE" serve --stdio --toolset books-v2 --db "$BENCH_DIR/stdio-books.db"
      --audit-db "$BENCH_DIR/stdio-audit.sqlite")
    ;;
  esac
  local out
  out=$(taskset -c 1 "$RELEASE/mcp-stdio-load" --revision "$rev" --warmup "$WARMUP" \
    --duration "$DURATION" -- taskset -c 0 "${cmd[@]}" 2>"$BENCH_DIR/stdio-$server.log") ||
    die "$server ($rev) did not run: $(tail -c 400 "$BENCH_DIR/stdio-$server.log")"
  [ "$(field failed "$out")" = 0 ] || die "$server ($rev): failed calls: $out"
  [ "$(field ok "$out")" -gt 0 ] || die "$server ($rev): no call completed: $out"
  printf '%s\n' "$out"
}

RESULTS=$BENCH_DIR/stdio-results.txt
: >"$RESULTS"
for rev in $REVISIONS; do
  for round in $(seq "$ROUNDS"); do
    for server in bare same-work toolgate; do
      log "== $rev, round $round: $server"
      line=$(run_one "$server" "$rev")
      echo "$rev $round $server $line" >>"$RESULTS"
    done
  done
done

echo
echo "MCP over stdio, one session, one tools/call books_get {\"ids\":[1]} at a time (${DURATION}s measured"
echo "after ${WARMUP}s); ratios are toolgate's against the same-work floor in the same round."
python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    rev, rnd, server, *fields = line.split()
    kv = dict(f.split("=", 1) for f in fields if "=" in f)
    rows.setdefault((rev, int(rnd)), {})[server] = kv
print(f"{'revision':<11} {'round':>5} {'bare c/s':>9} {'floor c/s':>9} {'toolgate c/s':>12} {'x floor':>7}"
      f" {'p99 floor/tg (us)':>18} {'p99 x':>6} {'RSS floor/tg (MB)':>18} {'RSS x':>6} {'own floor/tg (MB)':>18} {'own x':>6}")
summary = {}
for (rev, rnd), servers in sorted(rows.items()):
    bare, floor, tg = servers["bare"], servers["same-work"], servers["toolgate"]
    rps_x = float(tg["rps"]) / float(floor["rps"])
    p99_x = int(tg["p99_us"]) / int(floor["p99_us"])
    rss_f, rss_t = int(floor["server_peak_rss_kb"]), int(tg["server_peak_rss_kb"])
    rss_x = rss_t / rss_f
    own_f, own_t = int(floor["server_anon_kb"]), int(tg["server_anon_kb"])
    own_x = own_t / own_f
    summary.setdefault(rev, []).append((rps_x, p99_x, rss_x, own_x))
    print(f"{rev:<11} {rnd:>5} {float(bare['rps']):>9,.0f} {float(floor['rps']):>9,.0f} {float(tg['rps']):>12,.0f}"
          f" {rps_x:>6.2f}x {floor['p99_us']:>8} / {tg['p99_us']:<7} {p99_x:>5.2f}x"
          f" {rss_f / 1024:>8.1f} / {rss_t / 1024:<7.1f} {rss_x:>5.2f}x"
          f" {own_f / 1024:>8.1f} / {own_t / 1024:<7.1f} {own_x:>5.2f}x")
print()
print("Median over the rounds (min-max); goals: calls/s at least 0.90x, p99 and RSS at most 1.30x.")
print("RSS is the peak (VmHWM, binary and library pages included); own memory is the anonymous")
print("part resident after the measured window (RssAnon): what the process itself allocated.")
for rev, ratios in summary.items():
    cols = list(zip(*ratios))
    text = [f"{statistics.median(c):.2f}x ({min(c):.2f}-{max(c):.2f})" for c in cols]
    print(f"{rev:<11} calls/s {text[0]}   p99 {text[1]}   peak RSS {text[2]}   own memory {text[3]}")
PY
