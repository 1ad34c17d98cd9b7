#!/usr/bin/env bash
# Builds cluster-autoscaler from its source, for `kubejoule-rl benchmark --on-cluster --ca-bin`
# (docs/how-to/real-kubernetes.md), into the k8s-tools cache. For a machine that reaches GitHub:
# the Go module proxy answers 403 "This module version is not available" for
# k8s.io/autoscaler/cluster-autoscaler, so tools/k8s/build.sh (and CI, which reaches only the
# registries) cannot build it. Its dependencies still come from the proxy.
#
#   git clone --depth 1 --branch cluster-autoscaler-1.36.1 https://github.com/kubernetes/autoscaler
#   tools/k8s/build-ca-from-source.sh autoscaler/cluster-autoscaler
#
# SRC_DIR is the cluster-autoscaler/ directory of that checkout. The binary is built with the tags
# `externalgrpc,kwok` (the kwok cloud provider the benchmark uses, and the externalgrpc one) and
# lands in <cache>/cluster-autoscaler/<key>/cluster-autoscaler, <key> hashing its go.sum, its
# commit (when SRC_DIR is in a git checkout), the tags and the Go version. The last line printed
# is the binary's path: give it as --ca-bin or $KUBEJOULE_CA_BIN. No upstream code is in this
# repository.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -f "$1/go.mod" ] || ! grep -q '^module k8s.io/autoscaler/cluster-autoscaler' "$1/go.mod"; then
  echo "usage: $0 SRC_DIR   (SRC_DIR: the cluster-autoscaler/ directory of a kubernetes/autoscaler checkout)" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
tags=externalgrpc,kwok
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
key=$( { cat "$src/go.sum"; echo "$commit $tags"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)
cache_root=${KUBEJOULE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubejoule/k8s-tools}
out="$cache_root/cluster-autoscaler/$key"
if [ ! -x "$out/cluster-autoscaler" ]; then
  mkdir -p "$out"
  echo "build-ca-from-source.sh: building cluster-autoscaler ($commit, tags $tags) — several minutes" >&2
  if ! (cd "$src" && CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "-s -w" \
          -o "$out/.cluster-autoscaler.tmp.$$" .) >"$out/build.log" 2>&1; then
    rm -f "$out/.cluster-autoscaler.tmp.$$"
    echo "build-ca-from-source.sh: the build failed; last lines of $out/build.log:" >&2
    tail -n 20 "$out/build.log" >&2
    exit 1
  fi
  mv "$out/.cluster-autoscaler.tmp.$$" "$out/cluster-autoscaler"
fi
echo "$out/cluster-autoscaler"
