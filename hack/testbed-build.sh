#!/usr/bin/env bash
# Builds, once, the binaries the local test bed runs: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler from k8s.io/kubernetes, kwok, and
# the Lambda Runtime Interface Emulator (aws-lambda-rie) that runs function
# bootstraps for the local Step Functions service (internal/sfnlocal). They are
# cached by version outside the repository's tracked files (NODETIDE_CACHE,
# default ~/.cache/nodetide) and rebuilt only when missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=v1.37.2
kwok_version=v0.8.0
rie_version=v0.0.0-20261030222936-bef5c4ba774d
cache=${NODETIDE_CACHE:-$HOME/.cache/nodetide}
dir="$cache/testbed/k8s-$k8s_version-kwok-$kwok_version"
mkdir -p "$dir"

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"

build() { # name module-dir package [ldflags]
  local name=$1 mod=$2 pkg=$3 flags=${4:-"-s -w"}
  if [ -x "$dir/$name" ]; then return 0; fi
  local start=$SECONDS
  echo "testbed: building $name (first time only; minutes on 2 cores) ..." >&2
  ( cd "$root/hack/tools/$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$dir/$name.tmp" "$pkg" ) &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15
    kill -0 "$pid" 2>/dev/null && echo "testbed:   still building $name ($((SECONDS - start))s)" >&2
  done
  wait "$pid"
  mv "$dir/$name.tmp" "$dir/$name"
  echo "testbed: built $name in $((SECONDS - start))s" >&2
}

build etcd controlplane go.etcd.io/etcd/server/v3 "$ldflags"
build kube-apiserver controlplane k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build kube-controller-manager controlplane k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
build kube-scheduler controlplane k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok

# kwok's stage definitions ship in its module; copy the ones the bed needs.
# Named by path: pod/general holds stages of the same names that model a
# slower pod lifecycle; the bed wants the "fast" ones (nodes Ready and pods
# Running at once).
if [ ! -f "$dir/kwok-stages.yaml" ]; then
  src=$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  : > "$dir/kwok-stages.yaml.tmp"
  for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
           pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    stage="$src/kustomize/stage/$f.yaml"
    [ -f "$stage" ] || { echo "testbed: kwok stage $f.yaml not found under $src/kustomize/stage" >&2; exit 1; }
    { cat "$stage"; echo "---"; } >> "$dir/kwok-stages.yaml.tmp"
  done
  mv "$dir/kwok-stages.yaml.tmp" "$dir/kwok-stages.yaml"
fi
# The RIE is a plain Go command, so `go install` at its pinned pseudo-version
# builds it (~35 s) straight into its own cache directory; internal/sfnlocal looks
# for it there.
rie_dir="$cache/testbed/aws-lambda-rie-$rie_version"
if [ ! -x "$rie_dir/aws-lambda-rie" ]; then
  start=$SECONDS
  echo "testbed: installing aws-lambda-rie (first time only) ..." >&2
  mkdir -p "$rie_dir"
  CGO_ENABLED=0 GOBIN="$rie_dir" go install -trimpath \
    "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$rie_version"
  echo "testbed: installed aws-lambda-rie in $((SECONDS - start))s" >&2
fi
echo "$dir"
