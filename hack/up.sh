#!/usr/bin/env bash
# make up / make down: a local nodetide cluster that stays up in the
# background (hack/up: control plane, dynalite, the drain state machine).
#
#   hack/up.sh up      start it, wait until it is ready, print how to use it
#   hack/up.sh down    stop it (also after a crash: its pid file says what ran)
#   hack/up.sh status  say whether it is up
#
# NODETIDE_UP_DIR (default .nodetide-up) holds the pid file, the log, the
# kubeconfig and the env file; NODETIDE_UP_CONFIG (default
# nodetide.local.yaml) is the config it writes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${NODETIDE_UP_DIR:-.nodetide-up}
config=${NODETIDE_UP_CONFIG:-nodetide.local.yaml}
pidfile="$dir/pid"
log="$dir/up.log"
bin="$dir/nodetide-up"
# How long up waits for the bed; the first start builds the drain function.
ready_timeout=${NODETIDE_UP_TIMEOUT:-600}

die() { echo "up: $*" >&2; exit 1; }

# running prints the supervisor's pid if the pid file names a live one (a
# reused pid running something else does not count).
running() {
  [ -f "$pidfile" ] || return 1
  local pid
  pid=$(cat "$pidfile")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "nodetide-up" || return 1
  echo "$pid"
}

cleanup_files() {
  rm -f "$pidfile" "$dir/ready" "$dir/env" "$dir/kubeconfig" "$bin"
  # The run's temporary files (etcd's data, the drain function's build),
  # which a killed run could not remove itself.
  rm -rf "$dir/tmp"
  # The config is ours only if up wrote it.
  if [ -f "$config" ] && head -1 "$config" | grep -q '^# Written by make up'; then rm -f "$config"; fi
}

up() {
  if pid=$(running); then
    echo "already up (pid $pid); make down stops it"
    [ -f "$dir/ready" ] && cat "$dir/ready"
    return 0
  fi
  if [ -f "$pidfile" ]; then
    echo "up: a previous run (pid $(cat "$pidfile")) is gone; clearing its files" >&2
    cleanup_files
  fi
  if [ -f "$config" ] && ! head -1 "$config" | grep -q '^# Written by make up'; then
    die "$config exists and was not written by make up: move it away first"
  fi
  mkdir -p "$dir"
  echo "up: building hack/up ..." >&2
  go build -o "$bin" ./hack/up
  echo "up: starting the control plane, dynalite and the drain state machine (log: $log) ..." >&2
  # setsid: its own session, so it survives the make that started it and
  # a Ctrl-C in that terminal.
  # Its temporary files go under $dir/tmp, so down removes them even after
  # a crash.
  mkdir -p "$dir/tmp"
  TMPDIR=$(cd "$dir/tmp" && pwd) setsid "$bin" -dir "$dir" -config "$config" >"$log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$pidfile"
  for _ in $(seq $((ready_timeout * 5))); do
    [ -f "$dir/ready" ] && { cat "$dir/ready"; return 0; }
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$log" >&2
      cleanup_files
      die "the local cluster failed to start (log above)"
    fi
    sleep 0.2
  done
  tail -n 30 "$log" >&2
  down
  die "the local cluster was not ready within ${ready_timeout}s"
}

down() {
  if ! pid=$(running); then
    if [ -f "$pidfile" ]; then
      echo "not running (pid $(cat "$pidfile") is gone); its children died with it; clearing its files"
      cleanup_files
    else
      echo "not up"
    fi
    return 0
  fi
  kill -TERM "$pid"
  # It stops its children in order; past 60 s it is killed, and its
  # children die with it (parent-death signal).
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "up: pid $pid did not stop within 60s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  cleanup_files
  echo "down: stopped (pid $pid)"
}

status() {
  if pid=$(running); then
    echo "up (pid $pid)"
    [ -f "$dir/ready" ] && cat "$dir/ready"
  else
    echo "not up"
    return 1
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: hack/up.sh up|down|status" ;;
esac
