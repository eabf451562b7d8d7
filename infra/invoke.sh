#!/usr/bin/env bash
# Runs one function's bootstrap under the Lambda Runtime Interface Emulator —
# what `sam local invoke` runs inside its container — and sends it one event:
#
#   infra/invoke.sh FN EVENT [BOOTSTRAP]   (make invoke FN=evaluate EVENT=events/evaluate-plan.json)
#   infra/invoke.sh --all                  (make invoke: every event in events/ against make up's cluster)
#
# BOOTSTRAP defaults to build/<fn>/bootstrap. ARCH (default: this machine's)
# is the bootstrap's architecture: a foreign one (ARCH=arm64 on x86-64, as
# deployed) runs through qemu-<arch>-static (Debian/Ubuntu: apt-get install
# qemu-user-static).
#
# The function reads its config from the environment, as in Lambda:
# NODETIDE_CONFIG_FILE (a path), NODETIDE_CONFIG (the YAML) or
# NODETIDE_CONFIG_PARAMETER (an SSM parameter name; needs AWS credentials).
# AWS credentials and AWS_REGION, when set, are passed through; so are
# NODETIDE_DRAIN_STATE_MACHINE_ARN and AWS_ENDPOINT_URL_SFN. --all takes
# them all from make up's env file (.nodetide-up/env).
#
# The emulator is the one hack/testbed-build.sh caches (installed here if
# missing, ~35 s).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
fn=${1:-}
event=${2:-}
bootstrap=${3:-$root/build/$fn/bootstrap}
arch=${ARCH:-$(go env GOARCH)}

die() { echo "invoke: $*" >&2; exit 1; }

# --all: every sample event, each through its function, against the local
# cluster make up keeps running; a summary line per event.
if [ "$fn" = --all ]; then
  up_dir=${NODETIDE_UP_DIR:-.nodetide-up}
  case "$up_dir" in /*) ;; *) up_dir="$root/$up_dir" ;; esac
  env_file="$up_dir/env"
  [ -f "$env_file" ] || die "the local cluster is not up: run make up first"
  # shellcheck source=/dev/null
  source "$env_file"
  unset NODETIDE_CONFIG NODETIDE_CONFIG_PARAMETER
  # Schedules first (put before get, run, delete), then evaluate, then the
  # drain events: drain-step is the state machine's Prepare sent by hand,
  # so its claim on the sample node is released at once (as enable --force
  # does) before the enables; shutdown last, as it drains and removes the
  # node (make up puts it back).
  events=(
    schedule-put schedule-list schedule-get schedule-run schedule-scheduled schedule-delete
    evaluate-plan evaluate-run evaluate-scheduled evaluate-add
    drain-recover drain-execution-ended drain-step release-step drain-enable-node drain-enable-all drain-shutdown
  )
  for f in "$root"/events/*.json; do
    name=$(basename "$f" .json)
    [[ " ${events[*]} " == *" $name "* ]] || events+=("$name")
  done
  tmp=$(mktemp -d -t nodetide-invoke-all.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  node=$(sed -n 's/.*"node": *"\([^"]*\)".*/\1/p' "$root/events/drain-step.json" | head -n 1)
  printf '{"action": "enable", "node": "%s", "force": true}\n' "$node" >"$tmp/release-step.json"
  failed=0
  summary=()
  for name in "${events[@]}"; do
    f="$root/events/$name.json"
    label="$name"
    if [ "$name" = release-step ]; then
      f="$tmp/release-step.json"
      label="(release drain-step's claim: enable --force)"
    fi
    [ -f "$f" ] || continue
    fn=${name%%-*}
    [ "$name" = release-step ] && fn=drain
    # An emulator that failed before the function answered (a port taken
    # between the check and its bind) is retried once.
    for attempt in 1 2; do
      out=$(ARCH=$arch "$0" "$fn" "$f" "${BOOTSTRAP_DIR:-$root/build}/$fn/bootstrap" 2>&1) && rc=0 || rc=$?
      grep -q '^--- response ---$' <<<"$out" && break
    done
    response=$(sed -n '/^--- response ---$/,$p' <<<"$out" | tail -n +2)
    if [ "$rc" = 0 ]; then
      summary+=("ok      $label")
    else
      failed=$((failed + 1))
      summary+=("FAILED  $label: $(tr -d '\n' <<<"${response:-$(tail -n 5 <<<"$out")}" | cut -c1-300)")
      echo "--- $label ---" >&2
      echo "$out" >&2
    fi
  done
  printf '%s\n' "${summary[@]}"
  [ "$failed" = 0 ] || die "$failed of ${#summary[@]} events failed (output above)"
  exit 0
fi

case "$fn" in
  # The stack's sizes (infra/stack/stack.go; evaluate's timeout with the default watchFor).
  evaluate) timeout=75 memory=256 ;;
  drain) timeout=120 memory=256 ;;
  schedule) timeout=90 memory=256 ;;
  *) die "usage: make invoke FN=evaluate|drain|schedule EVENT=events/<file>.json" ;;
esac
[ -n "$event" ] || die "usage: make invoke FN=$fn EVENT=events/<file>.json (see events/)"
[ -f "$event" ] || die "event file $event not found"
[ -x "$bootstrap" ] || die "$bootstrap missing: run make build (or make invoke, which builds it)"
bootstrap=$(cd "$(dirname "$bootstrap")" && pwd)/$(basename "$bootstrap")
if [ -z "${NODETIDE_CONFIG:-}${NODETIDE_CONFIG_FILE:-}${NODETIDE_CONFIG_PARAMETER:-}" ]; then
  die "no config: set NODETIDE_CONFIG_FILE=path/to/nodetide.yaml (or NODETIDE_CONFIG, or NODETIDE_CONFIG_PARAMETER)"
fi
if [ -n "${NODETIDE_CONFIG_FILE:-}" ]; then
  [ -f "$NODETIDE_CONFIG_FILE" ] || die "NODETIDE_CONFIG_FILE=$NODETIDE_CONFIG_FILE not found"
  NODETIDE_CONFIG_FILE=$(cd "$(dirname "$NODETIDE_CONFIG_FILE")" && pwd)/$(basename "$NODETIDE_CONFIG_FILE")
  export NODETIDE_CONFIG_FILE
fi

# The emulator, at the version hack/testbed-build.sh pins.
rie_version=$(sed -n 's/^rie_version=//p' "$root/hack/testbed-build.sh")
[ -n "$rie_version" ] || die "no rie_version in hack/testbed-build.sh"
rie_dir="${NODETIDE_CACHE:-$HOME/.cache/nodetide}/testbed/aws-lambda-rie-$rie_version"
rie="$rie_dir/aws-lambda-rie"
if [ ! -x "$rie" ]; then
  echo "invoke: installing aws-lambda-rie $rie_version into $rie_dir (first time only) ..." >&2
  mkdir -p "$rie_dir"
  CGO_ENABLED=0 GOBIN="$rie_dir" go install -trimpath \
    "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$rie_version"
fi

# A bootstrap for another architecture runs through qemu.
program=("$bootstrap")
host=$(go env GOARCH)
if [ "$arch" != "$host" ]; then
  qarch=$arch
  [ "$arch" = arm64 ] && qarch=aarch64
  [ "$arch" = amd64 ] && qarch=x86_64
  qemu=$(command -v "qemu-$qarch-static" || command -v "qemu-$qarch" || true)
  [ -n "$qemu" ] || die "the bootstrap is linux/$arch and this machine is linux/$host: install qemu-user-static (apt-get install qemu-user-static) for qemu-$qarch-static, or leave ARCH unset"
  program=("$qemu" "$bootstrap")
fi

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    if port_free "$p"; then echo "$p"; return 0; fi
  done
  die "no free port found"
}
api_port=$(free_port)
rapid_port=$(free_port)
[ "$api_port" != "$rapid_port" ] || rapid_port=$(free_port)

log=$(mktemp -t nodetide-invoke.XXXXXX)
(
  cd "$(dirname "$bootstrap")" # Lambda runs in the code's directory
  export AWS_LAMBDA_FUNCTION_NAME="nodetide-$fn" AWS_LAMBDA_FUNCTION_TIMEOUT=$timeout \
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE=$memory _HANDLER=bootstrap TZ=:UTC
  # Its own process group, so the emulator and the bootstrap it runs stop
  # together.
  setsid=$(command -v setsid || true)
  exec $setsid "$rie" --runtime-interface-emulator-address "127.0.0.1:$api_port" \
    --runtime-api-address "127.0.0.1:$rapid_port" "${program[@]}"
) >"$log" 2>&1 &
rie_pid=$!
cleanup() {
  kill -- "-$rie_pid" 2>/dev/null || kill "$rie_pid" 2>/dev/null || true
  wait "$rie_pid" 2>/dev/null || true
  rm -f "$log"
}
trap cleanup EXIT

url="http://127.0.0.1:$api_port/2015-03-31/functions/function/invocations"
for _ in $(seq 100); do
  port_free "$api_port" || break
  kill -0 "$rie_pid" 2>/dev/null || { cat "$log" >&2; die "the emulator exited"; }
  sleep 0.1
done

echo "invoke: $fn <- $event" >&2
response=$(curl -sS --max-time $((timeout + 30)) -H 'Content-Type: application/json' --data-binary "@$event" "$url") || {
  cat "$log" >&2
  die "no response from $fn"
}
echo "--- function log ---" >&2
cat "$log" >&2
echo "--- response ---" >&2
if command -v jq >/dev/null; then
  jq . <<<"$response" 2>/dev/null || echo "$response"
else
  echo "$response"
fi
# An error comes back as {"errorMessage", "errorType"}; exit non-zero on it.
if command -v jq >/dev/null && jq -e 'type == "object" and has("errorType")' <<<"$response" >/dev/null 2>&1; then
  exit 2
fi
