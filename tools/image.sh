#!/usr/bin/env bash
# Builds the OCI images of etcd-wrapper and etcd-backup without a Docker
# daemon: static binaries (CGO_ENABLED=0), a non-root user (65532), the CA
# bundle of Debian's ca-certificates, and labels with the version, commit
# and source. They are written as an OCI layout; nothing leaves this machine
# unless a registry is given.
#
#   tools/image.sh [--out DIR] [--platforms linux/amd64,linux/arm64] [--push REGISTRY] [--licenses]
#
# The images are ghcr.io/etcdkit/etcd-wrapper and ghcr.io/etcdkit/etcd-backup,
# tagged with the version and latest. The wrapper's image that runs the
# etcd it embeds (3.7) is also tagged etcd3.7.3 and etcd3.7; the images
# that run an etcd 3.5 or 3.6 server as the wrapper's child are tagged
# etcd3.5.35, etcd3.5 and <version>-etcd3.5.35 (and so on): pick the etcd
# release by the tag, one minor step at a time. --push REGISTRY names them
# REGISTRY/etcd-wrapper and REGISTRY/etcd-backup instead and pushes them
# there, with the credentials of docker's config (docker login, or crane
# auth login). Without it, copy the layout with any OCI tool, e.g.
# skopeo copy oci:DIR:REF docker://REF.
#
# Beside the layout: each binary's CycloneDX SBOM, from its module graph
# by cyclonedx-gomod (pinned in tools/audit), as bin/<os>_<arch>/<name>.cdx.json,
# and each image's, which adds Debian's CA bundle and names the image by
# digest, as sbom/<image>[-etcd<release>]_<os>_<arch>.cdx.json.
set -euo pipefail
# Each go command here works in one module outside the workspace (tools'
# modules, or the library's or the binaries' module as it is released).
export GOWORK=off
here=$(cd "$(dirname "$0")" && pwd)
source "$here/toolchain.sh"
root=$(dirname "$here")
out=$root/out/images
platforms=linux/amd64,linux/arm64
push=
licenses=
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --platforms) platforms=$2; shift 2 ;;
    --push) push=${2:?--push needs a registry, e.g. --push registry.example.com/etcd}; shift 2 ;;
    --licenses) licenses=1; shift ;;
    *) echo "image.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

ca=/etc/ssl/certs/ca-certificates.crt
if ! ca_version=$(dpkg-query -W -f='${Version}' ca-certificates 2>/dev/null) || [[ ! -f $ca ]]; then
  echo "image.sh: the CA bundle comes from Debian's ca-certificates: apt-get install ca-certificates" >&2
  exit 1
fi

# The version is the one Go stamps into the binaries from the commit (the
# environment may turn VCS stamping off; the images need it).
export CGO_ENABLED=0 GOFLAGS=-buildvcs=auto
for platform in ${platforms//,/ }; do
  for name in etcd-wrapper etcd-backup; do
    (cd "$root/cmd" && GOOS=${platform%/*} GOARCH=${platform#*/} go build -trimpath -ldflags='-s -w' \
      -o "$out/bin/${platform%/*}_${platform#*/}/$name" "./$name")
  done
done
# The etcd servers the wrapper runs as its child, one wrapper image each
# (the etcd it embeds is the plain image's): built static from the
# modules that pin them, as tools/install-emulators.sh builds them.
etcd_versions=()
for minor in 35 36; do
  v=$(cd "$here/etcd$minor" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
  etcd_versions+=("${v#v}")
  for platform in ${platforms//,/ }; do
    (cd "$here/etcd$minor" && GOOS=${platform%/*} GOARCH=${platform#*/} GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' \
      -o "$out/bin/${platform%/*}_${platform#*/}/etcd-${v#v}" go.etcd.io/etcd/server/v3)
  done
done
# Each binary's SBOM beside it (tools/sbom.sh).
bins=()
for bin in "$out"/bin/*/*; do
  [[ $bin == *.cdx.json ]] || bins+=("$bin")
done
bash "$here/sbom.sh" ${licenses:+--licenses} "${bins[@]}"
embedded=$(cd "$root" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
first=${platforms%%,*}
version=$(go version -m "$out/bin/${first%/*}_${first#*/}/etcd-backup" | awk '$1 == "mod" { print $3 }')
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
created=$(git -C "$root" log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
# A tag takes no '+' (a modified work tree's version has one).
tag=${version//+/-}

(cd "$here/image" && go run . --out "$out/oci" --bin "$out/bin" --platforms "$platforms" \
  --repository "${push:-ghcr.io/etcdkit}" --tags "$tag,latest" --version "$version" --revision "$revision" \
  --created "$created" --ca-bundle "$ca" --ca-version "$ca_version" --sbom "$out/sbom" \
  --etcd "$(IFS=,; echo "${etcd_versions[*]}")" --embedded-etcd "${embedded#v}" ${push:+--push})
echo "image.sh: OCI layout in $out/oci" >&2
