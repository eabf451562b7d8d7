#!/usr/bin/env bash
# Runs one function's bootstrap (build/<fn>/bootstrap, linux/arm64) under the
# Lambda Runtime Interface Emulator — what `sam local invoke` runs inside its
# container — and sends it one event:
#
#   infra/invoke.sh FN EVENT          (make invoke FN=evaluate EVENT=events/evaluate-plan.json)
#
# The function reads its config from the environment, as in Lambda:
# NODETIDE_CONFIG_FILE (a path), NODETIDE_CONFIG (the YAML) or
# NODETIDE_CONFIG_PARAMETER (an SSM parameter name; needs AWS credentials).
# AWS credentials and AWS_REGION, when set, are passed through; so is
# NODETIDE_DRAIN_STATE_MACHINE_ARN.
#
# The emulator is the one hack/testbed-build.sh caches (installed here if
# missing, ~35 s). On a non-arm64 machine the bootstrap runs through
# qemu-aarch64-static (Debian/Ubuntu: apt-get install qemu-user-static).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
fn=${1:-}
event=${2:-}

die() { echo "invoke: $*" >&2; exit 1; }

case "$fn" in
  # The stack's sizes (infra/stack/stack.go; evaluate's timeout with the default watchFor).
  evaluate) timeout=75 memory=384 ;;
  drain) timeout=120 memory=256 ;;
  schedule) timeout=90 memory=384 ;;
  *) die "usage: make invoke FN=evaluate|drain|schedule EVENT=events/<file>.json" ;;
esac
[ -n "$event" ] || die "usage: make invoke FN=$fn EVENT=events/<file>.json (see events/)"
[ -f "$event" ] || die "event file $event not found"
bootstrap="$root/build/$fn/bootstrap"
[ -x "$bootstrap" ] || die "$bootstrap missing: run make build"
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

# The bootstrap is linux/arm64, like the deployed function.
program=("$bootstrap")
case "$(uname -m)" in
  aarch64 | arm64) ;;
  *)
    qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
    [ -n "$qemu" ] || die "build/$fn/bootstrap is linux/arm64 and this machine is $(uname -m): install qemu-user-static (apt-get install qemu-user-static) for qemu-aarch64-static"
    program=("$qemu" "$bootstrap")
    ;;
esac

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
