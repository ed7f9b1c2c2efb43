#!/usr/bin/env bash
# bench-telemetry.sh: what OpenTelemetry export costs an MCP `tools/call` (issue 38). Measures
# `toolgate serve --http` under mcp-load with telemetry off (no [telemetry]), on (OTLP/HTTP
# protobuf to a real OTLP receiver, sampling 1.0), on-grpc (the same over OTLP/gRPC) and down
# (an endpoint where nothing listens, sampling 1.0), at several concurrencies, and prints
# req/s, p50/p99 latency, server RSS, CPU, and the ratio of req/s and of p99 to the `off` row
# of the same concurrency measured in this same run.
#
# Every (mode, conns) row is measured REPEATS times, each with a fresh server, a fresh books
# database and (for on, on-grpc) a fresh receiver; the median of each column is kept and the
# spread (min-max of req/s) printed. Modes are interleaved within each repeat, so slow drift of
# the machine's other load falls on every mode alike. The server runs on core 0 (taskset), the
# load client and the receiver (the collector) on core 1, so the export's own work (span
# recording, encoding, sending) is all the server core pays for. After the rows, a counted run
# per exporting mode (8 connections, a fixed number of calls) checks that the receiver got 2
# spans per call (the server span and execute_tool), and what toolgate said about dropped spans.
#
# Environment (all optional): WARMUP (s, default 2), DURATION (s, default 5), CONNS (default
# "1 8 64"), REPEATS (default 3), MODES (default "off on on-grpc down"; "slow" adds a receiver
# that answers every export after SLOW_MS, default 2000), REVISIONS (default "2026-07-28"; add
# 2025-11-25), TOOLSET (default books-v4), TOOL/ARGUMENTS (default books_search
# {"author":"Rowling"}: books-v4 has no books_get), BENCH_DIR (scratch, default
# target/telemetry-bench), BENCH_RETRIES (how many times a run disturbed by other work,
# other% > 10, is measured again; default 1), COUNT_CALLS (calls per connection of the counted
# run, default 500).
#
# Exits non-zero when something broke: a build failed, a server or receiver did not start, or a
# measured run had failures. The goal lines are informational.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
WARMUP=${WARMUP:-2}
DURATION=${DURATION:-5}
CONNS=${CONNS:-"1 8 64"}
REPEATS=${REPEATS:-3}
MODES=${MODES:-"off on on-grpc down"}
REVISIONS=${REVISIONS:-"2026-07-28"}
TOOLSET=${TOOLSET:-books-v4}
TOOL=${TOOL:-books_search}
ARGUMENTS=${ARGUMENTS:-'{"author":"Rowling"}'}
SLOW_MS=${SLOW_MS:-2000}
BENCH_DIR=${BENCH_DIR:-$ROOT/target/telemetry-bench}
RETRIES=${BENCH_RETRIES:-1}
COUNT_CALLS=${COUNT_CALLS:-500}
SERVER_CPU=0
CLIENT_CPU=1
LIMIT_S=900 # the receiver stops itself after this long
RELEASE=$ROOT/target/release
TOOLGATE=$RELEASE/toolgate
RECEIVER=$RELEASE/otlp-receiver

BENCH_NAME=bench-telemetry
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

[ "$(nproc)" -ge 2 ] || die "needs 2 cores (server on core $SERVER_CPU, client on core $CLIENT_CPU)"
command -v taskset >/dev/null || die "taskset (util-linux) is missing"
[[ " $MODES " == *" off "* ]] || die "MODES must include off (the ratios are to it)"
for mode in $MODES; do
  case $mode in off | on | on-grpc | down | slow) ;; *) die "unknown mode '$mode' in MODES" ;; esac
done
mkdir -p "$BENCH_DIR"

echo "bench-telemetry: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' (crates/ has uncommitted changes)')"
echo "$(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"

log "== building toolgate, mcp-load and otlp-receiver (release)"
cargo build --release --locked -p toolgate -p toolgate-mcp-bench -p toolgate-otlp-receiver >&2

# --- the receiver -----------------------------------------------------------------------------
# One at a time: RPID, its stdin held open on RFD (closing it stops the receiver), its stdout in
# RCV_OUT; RCV_HTTP and RCV_GRPC are its endpoints.
RPID="" RFD="" RCV_HTTP="" RCV_GRPC=""
RCV_OUT=$BENCH_DIR/receiver.out
RCV_IN=$BENCH_DIR/receiver.in

# start_receiver [--delay-ms MS]: starts it on the client core, sets RPID, RCV_HTTP, RCV_GRPC.
start_receiver() {
  rm -f "$RCV_IN" "$RCV_OUT"
  mkfifo "$RCV_IN"
  taskset -c $CLIENT_CPU "$RECEIVER" --limit-secs $LIMIT_S "$@" <"$RCV_IN" >"$RCV_OUT" 2>"$BENCH_DIR/receiver.err" &
  RPID=$!
  exec {RFD}>"$RCV_IN"
  for _ in $(seq 100); do
    if grep -q '^http=' "$RCV_OUT" 2>/dev/null; then
      RCV_HTTP=$(field http "$(head -1 "$RCV_OUT")")
      RCV_GRPC=$(field grpc "$(head -1 "$RCV_OUT")")
      return 0
    fi
    kill -0 "$RPID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# stop_receiver: closes its stdin and waits for its counts line; sets RCV_COUNTS ("" if none).
stop_receiver() {
  RCV_COUNTS=""
  if [ -n "$RFD" ]; then
    exec {RFD}>&-
    RFD=""
  fi
  if [ -n "$RPID" ]; then
    for _ in $(seq 300); do kill -0 "$RPID" 2>/dev/null || break; sleep 0.1; done
    kill "$RPID" 2>/dev/null || true
    wait "$RPID" 2>/dev/null || true
    RPID=""
    RCV_COUNTS=$(grep '^stopped=' "$RCV_OUT" 2>/dev/null || true)
  fi
}

cleanup() {
  stop_server
  stop_receiver
  rm -f "$RCV_IN"
}
trap cleanup EXIT

# --- toolgate ---------------------------------------------------------------------------------
# write_config MODE FILE: the toolgate.toml of MODE (empty for off).
write_config() {
  local endpoint protocol=http/protobuf
  case $1 in
  off)
    : >"$2"
    return
    ;;
  on | slow) endpoint=$RCV_HTTP ;;
  on-grpc) endpoint=$RCV_GRPC protocol=grpc ;;
  down) endpoint=http://127.0.0.1:$(free_port) ;; # bound, then released: nothing listens
  esac
  printf '[telemetry]\notlp_endpoint = "%s"\nprotocol = "%s"\nsampling_ratio = 1.0\n' "$endpoint" "$protocol" >"$2"
}

# start_toolgate CONFIG PORT LOGFILE: a fresh books database, the server on the server core;
# sets PID and waits for the port.
start_toolgate() {
  rm -f "$BENCH_DIR/books.db"* "$BENCH_DIR/audit-telemetry.sqlite"*
  taskset -c $SERVER_CPU "$TOOLGATE" --config "$1" serve --http "127.0.0.1:$2" --toolset "$TOOLSET" \
    --db "$BENCH_DIR/books.db" --audit-db "$BENCH_DIR/audit-telemetry.sqlite" >"$3" 2>&1 &
  PID=$!
  wait_listening "$2"
}

# stop_toolgate: SIGTERM (toolgate then flushes what it holds, within its export timeout, twice
# at most), SIGKILL after 30 s; sets TG_EXIT (its exit status, or "killed").
stop_toolgate() {
  TG_EXIT=""
  [ -n "$PID" ] || return 0
  kill "$PID" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$PID" 2>/dev/null; then
    kill -9 "$PID" 2>/dev/null || true
    TG_EXIT=killed
  fi
  local rc=0
  wait "$PID" 2>/dev/null || rc=$?
  [ -n "$TG_EXIT" ] || TG_EXIT=$rc
  PID=""
}

# rss_mb PID: VmRSS of the process in MB ("?" when gone).
rss_mb() {
  awk '$1 == "VmRSS:" { printf "%.1f", $2 / 1024; found = 1 } END { if (!found) printf "?" }' "/proc/$1/status" 2>/dev/null || printf '?'
}

# load REVISION URL CONNS WARMUP DURATION [MORE...]: the load client on the client core.
load() {
  local rev=$1 url=$2 conns=$3 warmup=$4 duration=$5
  shift 5
  taskset -c $CLIENT_CPU "$RELEASE/mcp-load" --url "$url" --revision "$rev" --conns "$conns" \
    --warmup "$warmup" --duration "$duration" --tool "$TOOL" --arguments "$ARGUMENTS" "$@"
}

CLK_TCK=$(getconf CLK_TCK)
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
proc_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
now_ns() { date +%s%N; }
mid_sample=$(python3 -c "print($WARMUP + $DURATION / 2)")

# measure_row REVISION URL CONNS: one load run against $PID; sets M_OUT, M_SRV (server CPU, % of
# a core), M_RCV (the receiver's), M_OTHER (the rest of the machine: server, client and receiver
# excluded) and M_RSS (server VmRSS mid-measurement, MB).
measure_row() {
  local sampled=$BENCH_DIR/rss-sample sampler b0 s0 r0 t0 b1 s1 r1 t1 cli
  rm -f "$sampled"
  (sleep "$mid_sample" && rss_mb "$PID" >"$sampled") &
  sampler=$!
  b0=$(busy_ticks) s0=$(proc_ticks "$PID") r0=$(proc_ticks "${RPID:-0}") t0=$(now_ns)
  M_OUT=$(load "$1" "$2" "$3" "$WARMUP" "$DURATION") || M_OUT="failed=1"
  b1=$(busy_ticks) s1=$(proc_ticks "$PID") r1=$(proc_ticks "${RPID:-0}") t1=$(now_ns)
  wait "$sampler" 2>/dev/null || true
  M_RSS=$(cat "$sampled" 2>/dev/null || echo '?')
  cli=$(field client_cpu_pct "$M_OUT")
  read -r M_SRV M_RCV M_OTHER < <(python3 -c '
import sys
b0, b1, s0, s1, r0, r1, t0, t1, hz, cli = sys.argv[1:]
wall = (int(t1) - int(t0)) / 1e9
pct = lambda a, b: (int(b) - int(a)) / int(hz) / wall * 100
srv, rcv = pct(s0, s1), pct(r0, r1)
other = pct(b0, b1) - srv - rcv - (float(cli) if cli not in ("", "?") else 0)
print(f"{srv:.0f} {rcv:.0f} {max(other, 0):.0f}")' "$b0" "$b1" "$s0" "$s1" "$r0" "$r1" "$t0" "$t1" "$CLK_TCK" "${cli:-}")
}

# --- runs -------------------------------------------------------------------------------------
# Per (rev, mode, conns): space-separated values over the repeats.
declare -A RPS P50 P99 RSS SRV CLI RCV OTHER SPANS DROPPED
declare -A NOTE
BROKEN=0
BUSY=0
TG_NOTES=$BENCH_DIR/toolgate-exit-notes
: >"$TG_NOTES"

# run_once REV MODE CONNS: one fresh server (and receiver) and one measured run, kept in the
# arrays; returns 1 when it could not run at all.
run_once() {
  local rev=$1 mode=$2 c=$3 k=$1,$2,$3 port cfg logfile best="" attempt
  local b_out b_srv b_rcv b_other b_rss
  cfg=$BENCH_DIR/toolgate-$mode.toml
  logfile=$BENCH_DIR/toolgate-$mode-$c.log
  case $mode in
  on | on-grpc) start_receiver || {
    NOTE[$k]="receiver did not start: $(tail -c 300 "$BENCH_DIR/receiver.err" | tr '\n' ' ')"
    return 1
  } ;;
  slow) start_receiver --delay-ms "$SLOW_MS" || {
    NOTE[$k]="receiver did not start"
    return 1
  } ;;
  esac
  write_config "$mode" "$cfg"
  port=$(free_port)
  if ! start_toolgate "$cfg" "$port" "$logfile"; then
    NOTE[$k]="toolgate did not start: $(tail -c 300 "$logfile" | tr '\n' ' ')"
    stop_toolgate
    stop_receiver
    return 1
  fi
  for attempt in $(seq $((RETRIES + 1))); do
    measure_row "$rev" "http://127.0.0.1:$port/mcp" "$c"
    log "   $rev $mode $c conns: $M_OUT (srv ${M_SRV}%, rcv ${M_RCV}%, other ${M_OTHER}%)"
    if [ -z "$best" ] || [ "$M_OTHER" -lt "$b_other" ]; then
      best=$attempt b_out=$M_OUT b_srv=$M_SRV b_rcv=$M_RCV b_other=$M_OTHER b_rss=$M_RSS
    fi
    [ "$(field failed "$M_OUT")" != 0 ] && break # a failure is reported, never retried away
    [ "$b_other" -le 10 ] && break
    [ "$attempt" -le "$RETRIES" ] && log "   (disturbed by other work: measuring again)" && sleep 2
  done
  stop_toolgate
  if [ "$TG_EXIT" != 0 ]; then
    echo "$mode $c conns: toolgate exited $TG_EXIT: $(tail -c 400 "$logfile" | tr '\n' ' ')" >>"$TG_NOTES"
  fi
  stop_receiver
  if [ -n "$RCV_COUNTS" ]; then
    SPANS[$k]="${SPANS[$k]:-}$(($(field spans_http "$RCV_COUNTS") + $(field spans_grpc "$RCV_COUNTS"))) "
    DROPPED[$k]="${DROPPED[$k]:-}$(field toolgate_dropped "$RCV_COUNTS") "
  fi
  if [ "$(field failed "$b_out")" != 0 ]; then
    BROKEN=1
    NOTE[$k]="${NOTE[$k]:-}$(field failed "$b_out") failures: $(sed -n 's/^failure: //p' <<<"$b_out" | cut -c1-200). "
  fi
  [ "$b_other" -gt 10 ] && BUSY=1
  RPS[$k]="${RPS[$k]:-}$(field rps "$b_out") "
  P50[$k]="${P50[$k]:-}$(field p50_us "$b_out") "
  P99[$k]="${P99[$k]:-}$(field p99_us "$b_out") "
  CLI[$k]="${CLI[$k]:-}$(field client_cpu_pct "$b_out") "
  RSS[$k]="${RSS[$k]:-}$b_rss " SRV[$k]="${SRV[$k]:-}$b_srv " RCV[$k]="${RCV[$k]:-}$b_rcv " OTHER[$k]="${OTHER[$k]:-}$b_other "
}

for rev in $REVISIONS; do
  for c in $CONNS; do
    for r in $(seq "$REPEATS"); do
      for mode in $MODES; do
        log "== $rev $mode, $c conns, repeat $r/$REPEATS (server core $SERVER_CPU, client and receiver core $CLIENT_CPU)"
        run_once "$rev" "$mode" "$c" || BROKEN=1
      done
    done
  done
done

# --- the counted runs: spans received against calls made ---------------------------------------
# COUNT_LINES: one line per exporting mode measured.
COUNT_LINES=()
count_run() {
  local rev=$1 mode=$2 port cfg logfile out ok failed spans expected
  cfg=$BENCH_DIR/toolgate-$mode-count.toml
  logfile=$BENCH_DIR/toolgate-$mode-count.log
  if [ "$mode" != down ]; then
    start_receiver || {
      COUNT_LINES+=("$mode: receiver did not start")
      BROKEN=1
      return
    }
  fi
  write_config "$mode" "$cfg"
  port=$(free_port)
  if ! start_toolgate "$cfg" "$port" "$logfile"; then
    COUNT_LINES+=("$mode: toolgate did not start: $(tail -c 200 "$logfile" | tr '\n' ' ')")
    BROKEN=1
    stop_toolgate
    stop_receiver
    return
  fi
  out=$(load "$rev" "http://127.0.0.1:$port/mcp" 8 0 120 --max-requests "$COUNT_CALLS") || out="failed=1"
  stop_toolgate
  stop_receiver
  ok=$(field ok "$out") failed=$(field failed "$out")
  [ "${failed:-1}" = 0 ] || BROKEN=1
  if [ "$mode" = down ]; then
    local said
    said=$(grep -i 'drop' "$logfile" | tail -1 | cut -c1-300 || true)
    COUNT_LINES+=("down: $ok calls ($failed failed), $((2 * ${ok:-0})) spans ended; toolgate exited $TG_EXIT; the count of spans it dropped is not printed (toolgate.telemetry.spans.dropped goes to the same dead endpoint)${said:+; it said: $said}")
    return
  fi
  if [ -z "$RCV_COUNTS" ]; then
    COUNT_LINES+=("$mode: $ok calls ($failed failed); the receiver printed no counts (see $BENCH_DIR/receiver.err)")
    BROKEN=1
    return
  fi
  spans=$(($(field spans_http "$RCV_COUNTS") + $(field spans_grpc "$RCV_COUNTS")))
  expected=$((2 * ${ok:-0}))
  local verdict="as expected (2 per call)"
  [ "$spans" = "$expected" ] || verdict="DIFFERS: expected $expected (2 per call)"
  COUNT_LINES+=("$mode: $ok calls ($failed failed, 8 conns x $COUNT_CALLS), $spans spans received: $verdict; toolgate's own dropped counter: $(field toolgate_dropped "$RCV_COUNTS"); receiver: $RCV_COUNTS")
}
for mode in $MODES; do
  case $mode in on | on-grpc | down | slow)
    log "== counted run: $mode, 8 conns x $COUNT_CALLS calls"
    count_run "${REVISIONS%% *}" "$mode"
    ;;
  esac
done

# --- report -----------------------------------------------------------------------------------
# med "V1 V2 ...": the median ("?" when empty or not numbers).
med() { python3 -c 'import statistics, sys
v = [float(x) for x in sys.argv[1:] if x not in ("?", "")]
print(f"{statistics.median(v):.{0 if all(x == int(x) for x in v) else 1}f}" if v else "?")' $1; }
spread() { python3 -c 'import sys
v = [float(x) for x in sys.argv[1:] if x not in ("?", "")]
print(f"{min(v):.0f}-{max(v):.0f}" if v else "?")' $1; }
ratio() { python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(a) / float(b):.3f}' if a not in ('', '?') and b not in ('', '?') and float(b) > 0 else '-')" "$1" "$2" 2>/dev/null || echo -; }

echo
echo "MCP Streamable HTTP ($TOOLSET), tools/call $TOOL $ARGUMENTS on loopback; server on core $SERVER_CPU,"
echo "client and receiver on core $CLIENT_CPU; ${WARMUP}s warm-up, ${DURATION}s measured; each row the median of $REPEATS runs"
echo "(fresh server each), spread = min-max req/s; RSS = server VmRSS mid-run (MB); x_rps, x_p99 = ratio to off"
echo "at the same conns in this run; srv%/cli%/rcv% = server/client/receiver CPU in % of one core;"
echo "other% = the rest of the machine meanwhile (>10: skewed; a run above it was measured again up to $RETRIES times)."
declare -A MED_RPS MED_P50 MED_P99
for rev in $REVISIONS; do
  echo
  echo "## $rev"
  printf '%-8s %5s %9s %13s %8s %8s %7s %6s %6s %6s %5s %5s %5s %6s\n' mode conns req/s spread p50_us p99_us RSS_MB x_rps x_p50 x_p99 srv% cli% rcv% other%
  for c in $CONNS; do
    for mode in $MODES; do
      k=$rev,$mode,$c
      if [ -z "${RPS[$k]:-}" ]; then
        printf '%-8s %5s %s\n' "$mode" "$c" "no result: ${NOTE[$k]:-}"
        continue
      fi
      MED_RPS[$k]=$(med "${RPS[$k]}") MED_P50[$k]=$(med "${P50[$k]}") MED_P99[$k]=$(med "${P99[$k]}")
      printf '%-8s %5s %9s %13s %8s %8s %7s %6s %6s %6s %5s %5s %5s %6s\n' "$mode" "$c" "${MED_RPS[$k]}" "$(spread "${RPS[$k]}")" \
        "${MED_P50[$k]}" "${MED_P99[$k]}" "$(med "${RSS[$k]}")" \
        "$(ratio "${MED_RPS[$k]}" "${MED_RPS[$rev,off,$c]:-}")" "$(ratio "${MED_P50[$k]}" "${MED_P50[$rev,off,$c]:-}")" \
        "$(ratio "${MED_P99[$k]}" "${MED_P99[$rev,off,$c]:-}")" \
        "$(med "${SRV[$k]}")" "$(med "${CLI[$k]}")" "$(med "${RCV[$k]}")" "$(med "${OTHER[$k]}")"
    done
  done
  for c in $CONNS; do
    for mode in $MODES; do
      k=$rev,$mode,$c
      [ -n "${NOTE[$k]:-}" ] && [ -n "${RPS[$k]:-}" ] && echo "  $mode $c conns: FLAGGED: ${NOTE[$k]}"
      if [ -n "${SPANS[$k]:-}" ]; then
        echo "  $mode $c conns: spans received per run: ${SPANS[$k]}(calls incl. warm-up not counted here; see the counted runs); toolgate's dropped counter: ${DROPPED[$k]}"
      fi
    done
  done
done

echo
echo "## spans received against calls made (counted runs, ${REVISIONS%% *})"
for line in "${COUNT_LINES[@]}"; do echo "$line"; done
if [ -s "$TG_NOTES" ]; then
  echo "toolgate's exit after SIGTERM, where not 0:"
  sort "$TG_NOTES" | cut -c1-300 | uniq -c | sed 's/^ */  /'
fi

echo
echo "## goal (informational): with a collector down or slow, calls keep their latency: p50 and p99"
echo "## within 5% of telemetry off at 8 connections (req/s shown alongside)"
for rev in $REVISIONS; do
  for mode in $MODES; do
    [ "$mode" = off ] && continue
    k=$rev,$mode,8
    if [ -z "${MED_RPS[$k]:-}" ] || [ -z "${MED_RPS[$rev,off,8]:-}" ]; then
      echo "$rev $mode: not measured at 8 conns"
      continue
    fi
    x50=$(ratio "${MED_P50[$k]}" "${MED_P50[$rev,off,8]}") x99=$(ratio "${MED_P99[$k]}" "${MED_P99[$rev,off,8]}")
    xr=$(ratio "${MED_RPS[$k]}" "${MED_RPS[$rev,off,8]}")
    if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 1.05 and float(sys.argv[2]) <= 1.05 else 1)" "$x50" "$x99"; then
      verdict=PASS
    else
      verdict=FAIL
    fi
    case $mode in down | slow) ;; *) verdict="$verdict (exporting: the goal is about down/slow)" ;; esac
    echo "$verdict $rev $mode at 8 conns: p50 x$x50, p99 x$x99, req/s x$xr of off"
  done
done

if [ "$BUSY" != 0 ]; then
  echo
  echo "WARNING: other work used more than 10% of a core during some runs (other%); those numbers are skewed."
fi
if [ "$BROKEN" != 0 ]; then
  log "bench-telemetry: some runs failed or did not start (see above and $BENCH_DIR/*.log)"
  exit 1
fi
