#!/usr/bin/env bash
# Installs the pinned store emulators the tests run against into tools/bin
# and tools/azurite/node_modules (both git-ignored), kube-apiserver with
# kubectl, built from the Kubernetes module pinned in tools/kube/go.mod, the
# etcd 3.5 and 3.6 servers pinned in tools/etcd35 and tools/etcd36, the
# etcd 3.7 server this module embeds (built from this module), kine (k3s' etcd API over SQLite) pinned in tools/kine,
# and Helm pinned in tools/helm.
# OpenStack Swift and memcached come from Debian's packages (the release's
# Swift: 2.30 on bookworm), run by tools/swift/run.sh, and PostgreSQL (15 on
# bookworm, a datastore of kine's) too, run by tools/postgres/run.sh.
# Idempotent: an emulator already installed at the pinned version is left
# alone.
set -euo pipefail
# Each go command here works in one module outside the workspace (tools'
# modules, or the library's or the binaries' module as it is released).
export GOWORK=off

VERSITYGW_VERSION=v1.8.0       # S3 (Apache-2.0); checks signatures like AWS
FAKE_GCS_VERSION=v1.56.1       # GCS
# Azurite is pinned in tools/azurite/package-lock.json (3.35.0; 3.36+ needs Node 22).

here=$(cd "$(dirname "$0")" && pwd)
bin="$here/bin"
mkdir -p "$bin"

install_go() { # name module version
  local name=$1 module=$2 version=$3 stamp="$bin/.$1.version"
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
    return
  fi
  echo "installing $name $version" >&2
  GOBIN="$bin" GOFLAGS=-buildvcs=false go install "$module@$version"
  echo "$version" >"$stamp"
}

install_go versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION" &
s3=$!
install_go fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION" &
gcs=$!

# kube-apiserver and kubectl: from their module, with the replace lines the
# Kubernetes module needs (tools/kube/go.mod), stamped with their version
# (kubectl refuses to compare versions without it).
install_kube() {
  local stamp="$bin/.kube.version" want
  want=$(cat "$here/kube/go.mod" "$here/kube/go.sum" | sha256sum | cut -d' ' -f1)
  if [[ -x "$bin/kube-apiserver" && -x "$bin/kubectl" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  local version
  version=$(cd "$here/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  echo "installing kube-apiserver and kubectl $version" >&2
  local minor=${version#v1.}
  minor=${minor%%.*}
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  (cd "$here/kube" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
  echo "$want" >"$stamp"
}
install_kube &
kube=$!

# The etcd servers of each release etcdkit runs: the tests back them up,
# restore for them, and run them under the wrapper.
install_etcd() { # minor, as in 35
  local dir="$here/etcd$1" name="etcd-${1:0:1}.${1:1}" want
  want=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -d' ' -f1)
  if [[ -x "$bin/$name" && -f "$bin/.$name.version" && "$(cat "$bin/.$name.version")" == "$want" ]]; then
    return
  fi
  echo "installing $name $(cd "$dir" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)" >&2
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o "$bin/$name" go.etcd.io/etcd/server/v3)
  echo "$want" >"$bin/.$name.version"
}
install_etcd 35 &
etcd35=$!

# kine: static, so SQLite is modernc's (the same file format as k3s'
# cgo build).
install_kine() {
  local dir="$here/kine" want
  want=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -d' ' -f1)
  if [[ -x "$bin/kine" && -f "$bin/.kine.version" && "$(cat "$bin/.kine.version")" == "$want" ]]; then
    return
  fi
  echo "installing kine $(cd "$dir" && go list -m -f '{{.Version}}' github.com/k3s-io/kine)" >&2
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o "$bin/kine" github.com/k3s-io/kine)
  echo "$want" >"$bin/.kine.version"
}
install_kine &
kine=$!

# Helm, which lints, renders and packages deploy/helm/etcdkit.
install_helm() {
  local dir="$here/helm" want
  want=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -d' ' -f1)
  if [[ -x "$bin/helm" && -f "$bin/.helm.version" && "$(cat "$bin/.helm.version")" == "$want" ]]; then
    return
  fi
  echo "installing helm $(cd "$dir" && go list -m -f '{{.Version}}' helm.sh/helm/v4)" >&2
  local version
  version=$(cd "$dir" && go list -m -f '{{.Version}}' helm.sh/helm/v4)
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-X helm.sh/helm/v4/internal/version.version=$version" \
    -o "$bin/helm" helm.sh/helm/v4/cmd/helm)
  echo "$want" >"$bin/.helm.version"
}
install_helm &
helm=$!
install_etcd 36 &
etcd36=$!
# etcd 3.7: the release the library embeds, built from tools/etcd (whose
# etcdctl and etcdutl the bench compares against), which pins the same
# etcd version as the library's go.mod: the library's module no longer
# requires everything etcd's main package imports.
install_etcd37() {
  local name=etcd-3.7 want have dir=$here/etcd
  want=$(cd "$here/.." && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
  have=$(cd "$dir" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
  if [[ $want != "$have" ]]; then
    echo "install-emulators: tools/etcd pins etcd server $have, the library $want: raise tools/etcd (go get -tool go.etcd.io/etcd/server/v3@$want)" >&2
    return 1
  fi
  want=$(cd "$dir" && cat go.mod go.sum | sha256sum | cut -d' ' -f1)
  if [[ -x "$bin/$name" && -f "$bin/.$name.version" && "$(cat "$bin/.$name.version")" == "$want" ]]; then
    return
  fi
  echo "installing $name $have" >&2
  (cd "$dir" && GOFLAGS=-buildvcs=false go build -o "$bin/$name" go.etcd.io/etcd/server/v3)
  echo "$want" >"$bin/.$name.version"
}
install_etcd37 &
etcd37=$!

install_swift() {
  local p missing=0
  for p in swift-proxy-server swift-account-server swift-container-server swift-object-server swift-ring-builder memcached; do
    command -v "$p" >/dev/null || missing=1
  done
  compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || missing=1
  [[ $missing == 0 ]] && return
  echo "installing swift, memcached and postgresql from Debian" >&2
  local sudo=()
  [[ $(id -u) == 0 ]] || sudo=(sudo)
  local pkgs=(swift-proxy swift-account swift-container swift-object memcached postgresql)
  if ! DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null; then
    "${sudo[@]}" apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null
  fi
}
install_swift &
swift=$!

lock="$here/azurite/package-lock.json"
stamp="$here/azurite/node_modules/.lock.sha256"
want=$(sha256sum "$lock" | cut -d' ' -f1)
if [[ ! -x "$here/azurite/node_modules/.bin/azurite-blob" || ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "installing azurite from $lock" >&2
  (cd "$here/azurite" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi

wait $s3
wait $gcs
wait $kube
wait $etcd35
wait $kine
wait $helm
wait $etcd36
wait $etcd37
wait $swift
echo "emulators ready in $here" >&2
