# Shared paths and process helpers of the local stack scripts (sourced, not executed).
STACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$STACK_DIR/../.." && pwd)
RUN_DIR=$STACK_DIR/.run
CACHE_DIR=${PREWARM_CACHE:-$HOME/.cache/prewarm}
BIN_CACHE=$CACHE_DIR/bin
VENVS=$CACHE_DIR/venv
# shellcheck source=../versions.env
source "$STACK_DIR/versions.env"

log() { echo "[stack $(date -u +%T)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

pid_alive() { [[ -f $RUN_DIR/$1.pid ]] && kill -0 "$(cat "$RUN_DIR/$1.pid")" 2>/dev/null; }

# start NAME CMD... : runs CMD in the background (own session, so `down` can end its whole process
# group) with output in .run/NAME.log and its PID in .run/NAME.pid. No-op when already running.
start() {
  local name=$1; shift
  if pid_alive "$name"; then log "$name already running (pid $(cat "$RUN_DIR/$name.pid"))"; return 0; fi
  log "starting $name"
  setsid "$@" >>"$RUN_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/$name.pid"
}

# wait_for WHAT TIMEOUT_S CMD... : polls CMD until it succeeds; on timeout shows the log tail.
wait_for() {
  local what=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for $what"
      [[ -f $RUN_DIR/$what.log ]] && tail -n 30 "$RUN_DIR/$what.log" >&2
      return 1
    fi
    if [[ -f $RUN_DIR/$what.pid ]] && ! pid_alive "$what"; then
      log "$what exited; last lines of its log:"
      tail -n 30 "$RUN_DIR/$what.log" >&2
      return 1
    fi
    sleep 0.5
  done
}

http_ok() { curl -fsS -o /dev/null --max-time 2 "$@"; }

# stop NAME... : ends the process groups started by `start`: TERM to all, wait up to 10 s, then
# KILL whatever is left. The names are signalled in the order given (dependants first).
stop() {
  local name pid pids=() names=()
  for name in "$@"; do
    [[ -f $RUN_DIR/$name.pid ]] || continue
    pid=$(cat "$RUN_DIR/$name.pid")
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping $name (pid $pid)"
      # A process stopped with SIGSTOP (the fault matrix's apiserver outage, if its test was
      # killed mid-case) acts on TERM only once continued.
      kill -CONT -- "-$pid" 2>/dev/null || kill -CONT "$pid" 2>/dev/null || true
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid"); names+=("$name")
    fi
    rm -f "$RUN_DIR/$name.pid"
  done
  local i alive
  for _ in $(seq 1 100); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      log "${names[$i]} did not stop in 10 s; killing it"
      kill -KILL -- "-${pids[$i]}" 2>/dev/null || kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
  done
}
