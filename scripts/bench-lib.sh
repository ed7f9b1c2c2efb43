# bench-lib.sh: what the MCP benchmark scripts share; sourced, not run. The sourcing script sets
# BENCH_NAME (for messages) first. Gives log, die, field, free_port, and one server process at a
# time in PID, stopped by stop_server and on exit.

log() { printf '%s\n' "$*" >&2; }
die() {
  log "$BENCH_NAME: $*"
  exit 1
}

# field NAME TEXT: the value of NAME=VALUE in the load client's output line.
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2" | head -1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The server being measured: stopped when its rows are done, and on exit whatever happened.
# A server under valgrind takes longer to stop, hence the 10 s before SIGKILL.
PID=""
stop_server() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill "$PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  PID=""
}
trap stop_server EXIT

# wait_listening PORT: waits (30 s at most) until the server in PID accepts on 127.0.0.1:PORT;
# fails when it exits first or never listens.
wait_listening() {
  for _ in $(seq 300); do
    kill -0 "$PID" 2>/dev/null || return 1
    (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
