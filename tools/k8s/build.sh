#!/usr/bin/env bash
# Builds the real Kubernetes components kubejoule's end-to-end tests and benchmarks run against,
# from the Go module proxy, into a cache outside the checkout keyed by the pinned versions.
#
#   tools/k8s/build.sh            build what is missing (progress on stderr), print nothing else
#   tools/k8s/build.sh --bin-dir  print the directory that holds (or will hold) the binaries
#   tools/k8s/build.sh --list     print "name module version" for each component
#
# Each component is a Go module of ours under tools/k8s/<module>/ whose go.mod pins the upstream
# version as a `tool` (k8s.io/kubernetes also needs its staging modules replaced: see its go.mod).
# No upstream code is in this repository.
#
# The cache ($KUBEJOULE_K8S_CACHE, or ${XDG_CACHE_HOME:-$HOME/.cache}/kubejoule/k8s-tools) has two
# levels, so that a change to one component rebuilds that component only:
#   store/<name>-<key>/<name>  one binary per build; <key> hashes what decides the binary and
#                              nothing else: its module's go.mod and go.sum, its recipe (package,
#                              ldflags, `go build` flags and environment; recipe_of below) and the
#                              Go version and platform.
#   <set>/bin/<name>           the directory --bin-dir prints: hard links to the store's binaries
#                              of the current recipes (<set> hashes their names and keys).
# Adding, dropping or re-pinning one component makes a new <set>/bin that links the unchanged
# binaries again (instant) and builds only the changed one. Old store entries stay until removed.
#
# cluster-autoscaler is not built: the Go module proxy refuses k8s.io/autoscaler/cluster-autoscaler
# at every version asked (403 "This module version is not available"; see docs/how-to/real-kubernetes.md).
# Where GitHub is reachable, tools/k8s/build-ca-from-source.sh builds it from a checkout of its source.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# name  module-dir  package  ldflags-kind
components=(
  "etcd etcd go.etcd.io/etcd/server/v3 plain"
  "kube-apiserver kubernetes k8s.io/kubernetes/cmd/kube-apiserver kube"
  "kube-controller-manager kubernetes k8s.io/kubernetes/cmd/kube-controller-manager kube"
  "kube-scheduler kubernetes k8s.io/kubernetes/cmd/kube-scheduler kube"
  "kwok kwok sigs.k8s.io/kwok/cmd/kwok plain"
  "helm helm helm.sh/helm/v4/cmd/helm helm"
  "metrics-server metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server metrics-server"
)
# The upstream module each package comes from (for versions and messages).
module_of() {
  case "$1" in
    go.etcd.io/etcd/server/v3) echo go.etcd.io/etcd/server/v3 ;;
    k8s.io/kubernetes/*) echo k8s.io/kubernetes ;;
    sigs.k8s.io/kwok/*) echo sigs.k8s.io/kwok ;;
    helm.sh/helm/v4/*) echo helm.sh/helm/v4 ;;
    sigs.k8s.io/metrics-server/*) echo sigs.k8s.io/metrics-server ;;
    *) echo "unknown package $1" >&2; return 1 ;;
  esac
}
version_of() {  # module-dir module -> the version its go.mod requires
  awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$here/$1/go.mod"
}
ldflags_of() {  # kind version
  case "$1" in
    kube) local minor=${2#v1.}; minor=${minor%%.*}
          echo "-s -w -X k8s.io/component-base/version.gitVersion=$2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" ;;
    helm) echo "-s -w -X helm.sh/helm/v4/internal/version.version=$2" ;;
    # metrics-server stamps its version as its own Makefile does (client-go's, reported in /version).
    metrics-server) echo "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$2" ;;
    *) echo "-s -w" ;;
  esac
}
# Every input of `go build` besides the module's files: changing any of these changes the key.
build_env="CGO_ENABLED=0"
build_flags="-mod=readonly -trimpath -buildvcs=false"
recipe_of() {  # component line -> the exact build, as one line (hashed into the key, shown on failure)
  local name dir pkg kind mod
  read -r name dir pkg kind <<<"$1"
  mod=$(module_of "$pkg")
  echo "(cd tools/k8s/$dir && $build_env go build $build_flags -ldflags '$(ldflags_of "$kind" "$(version_of "$dir" "$mod")")' $pkg)"
}
goversion=$(go env GOVERSION GOOS GOARCH 2>/dev/null | tr '\n' ' ' || true)
key_of() {  # component line -> the store key of its binary
  local name dir
  read -r name dir _ <<<"$1"
  { echo "$goversion"; recipe_of "$1"; cat "$here/$dir/go.mod" "$here/$dir/go.sum"; } | sha256sum | cut -c1-16
}

cache_root=${KUBEJOULE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubejoule/k8s-tools}
keys=()
for c in "${components[@]}"; do keys+=("$(key_of "$c")"); done
set_key=$(for i in "${!components[@]}"; do echo "${components[$i]%% *} ${keys[$i]}"; done | sha256sum | cut -c1-16)
bin_dir="$cache_root/$set_key/bin"

case "${1:-}" in
  --bin-dir) echo "$bin_dir"; exit 0 ;;
  --list)
    for c in "${components[@]}"; do
      read -r name dir pkg _ <<<"$c"; mod=$(module_of "$pkg"); echo "$name $mod $(version_of "$dir" "$mod")"
    done
    exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--bin-dir|--list]" >&2; exit 2 ;;
esac

command -v go >/dev/null || { echo "tools/k8s/build.sh: no 'go' on PATH: Go $(sed -n 's/^go //p' "$here/kubernetes/go.mod") or newer is needed" >&2; exit 1; }
mkdir -p "$bin_dir" "$cache_root/store"
total=${#components[@]}
start_all=$SECONDS
built=0
for i in "${!components[@]}"; do
  c=${components[$i]}
  n=$((i + 1))
  read -r name dir pkg _ <<<"$c"
  if [ -x "$bin_dir/$name" ]; then
    continue
  fi
  store="$cache_root/store/$name-${keys[$i]}"
  if [ ! -x "$store/$name" ]; then
    mod=$(module_of "$pkg")
    ver=$(version_of "$dir" "$mod")
    recipe=$(recipe_of "$c")
    mkdir -p "$store"
    log="$store/build.log"
    echo "[$n/$total] building $name from $mod $ver (first build of a component takes minutes; log: $log)" >&2
    t0=$SECONDS
    # Built to a temporary name of this run's own and renamed: an interrupted build never leaves a
    # binary behind, and two runs building the same component at once do not write one file.
    # shellcheck disable=SC2086  # $build_env and $build_flags are word lists on purpose
    if ! (cd "$here/$dir" && env $build_env go build $build_flags -ldflags "$(ldflags_of "${c##* }" "$ver")" \
            -o "$store/.$name.tmp.$$" "$pkg") >"$log" 2>&1; then
      echo "tools/k8s/build.sh: building $name failed (module $mod $ver)" >&2
      echo "  command: $recipe" >&2
      echo "  last lines of $log:" >&2
      tail -n 20 "$log" | sed 's/^/    /' >&2
      rm -f "$store/.$name.tmp.$$"
      exit 1
    fi
    mv "$store/.$name.tmp.$$" "$store/$name"
    built=$((built + 1))
    echo "[$n/$total] $name built in $((SECONDS - t0)) s" >&2
  fi
  # A hard link (a copy where the file system has none), renamed into place: --bin-dir's directory
  # holds every binary itself, whatever becomes of the store.
  ln -f "$store/$name" "$bin_dir/.$name.tmp.$$" 2>/dev/null || cp -f "$store/$name" "$bin_dir/.$name.tmp.$$"
  mv -f "$bin_dir/.$name.tmp.$$" "$bin_dir/$name"
done
if [ $((SECONDS - start_all)) -gt 0 ] || [ "$built" -gt 0 ]; then
  echo "tools/k8s/build.sh: components ready in $bin_dir ($built built, $((SECONDS - start_all)) s)" >&2
fi
