#!/usr/bin/env bash
# Builds a release of etcdkit from a clean work tree whose HEAD is tagged
# with the version (CONTRIBUTING.md, "Releasing", says when and how):
#
#   tools/release.sh vX.Y.Z [--out DIR] [--push REGISTRY]
#
# It writes to DIR (default out/release/vX.Y.Z):
#   etcdkit_vX.Y.Z_<os>_<arch>.tar.gz   etcd-wrapper and etcd-backup for
#                                       linux/amd64, linux/arm64,
#                                       darwin/amd64 and darwin/arm64, with
#                                       LICENSE, NOTICE, README.md, JSON.md
#                                       and the man pages
#   etcdkit_vX.Y.Z_<os>_<arch>.<binary>.cdx.json   each binary's CycloneDX
#                                       SBOM, from its module graph
#   images/oci, images/sbom, images/bin the images of tools/image.sh for
#                                       linux/amd64 and linux/arm64, their
#                                       SBOMs and their binaries' (pushed to
#                                       REGISTRY with --push)
#   etcdkit-X.Y.Z.tgz                   the Helm chart deploy/helm/etcdkit, its
#                                       version and appVersion the release's
#                                       (pushed to oci://REGISTRY/charts with
#                                       --push, by the pinned helm)
#   SHA256SUMS                          the SHA-256 of every file above
#
# Each binary stamps the version from the tag (Go records it from the
# commit), which `version` prints; the release stops if one says another,
# if CHANGELOG.md has no section for the version, or if tools/vulncheck.sh
# finds a known vulnerability in the code, with this toolchain's standard
# library.
set -euo pipefail
# Each go command here works in one module outside the workspace (tools'
# modules, or the library's or the binaries' module as it is released).
export GOWORK=off
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
source "$here/toolchain.sh"
version=${1:-}
shift || true
out=
push=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --push) push=(--push "${2:?--push needs a registry}"); shift 2 ;;
    *) echo "release.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release.sh: give the version as vX.Y.Z (semantic versioning), e.g. tools/release.sh v0.1.0" >&2
  exit 2
fi
cd "$root"
if [[ -n $(git status --porcelain) ]]; then
  echo "release.sh: the work tree has changes; a release is built from a commit, clean" >&2
  exit 1
fi
# Every module go.work lists is released at the version, each with the tag
# Go looks for: vX.Y.Z for the library, <directory>/vX.Y.Z for the others.
tags=()
for m in $(sed -n 's/^\t\(\.[^ ]*\)$/\1/p' go.work); do
  m=${m#./}; [[ $m == . ]] && m=
  tags+=("${m:+$m/}$version")
done
missing=()
for t in "${tags[@]}"; do
  git tag --points-at HEAD | grep -qx "$t" || missing+=("$t")
done
if ((${#missing[@]})); then
  echo "release.sh: HEAD is not tagged ${missing[*]}: tag each module first (CONTRIBUTING.md):" >&2
  for t in "${missing[@]}"; do echo "  git tag -a $t -m 'etcdkit $version'" >&2; done
  exit 1
fi
if ! grep -q "^## \[${version#v}\]" CHANGELOG.md; then
  echo "release.sh: CHANGELOG.md has no section ## [${version#v}]: move Unreleased there first" >&2
  exit 1
fi
out=${out:-$root/out/release/$version}
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The commit's time dates the man pages and the images, so that building
# the same tag again gives the same files.
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)
# Go stamps the version from the tag only with VCS stamping on.
export CGO_ENABLED=0 GOFLAGS=-buildvcs=true

host=$(go env GOOS)_$(go env GOARCH)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  goos=${platform%/*} goarch=${platform#*/}
  name=etcdkit_${version}_${goos}_${goarch}
  dir=$stage/$name
  mkdir -p "$dir/man"
  for cmd in etcd-wrapper etcd-backup; do
    (cd cmd && GOOS=$goos GOARCH=$goarch go build -trimpath -ldflags='-s -w' -o "$dir/$cmd" "./$cmd")
  done
  cp LICENSE NOTICE README.md JSON.md "$dir/"
  if [[ ${goos}_${goarch} == "$host" ]]; then
    for cmd in etcd-wrapper etcd-backup; do
      got=$("$dir/$cmd" version | head -1)
      if [[ $got != "$cmd $version" ]]; then
        echo "release.sh: $cmd version says \"$got\", not $version" >&2
        exit 1
      fi
    done
    "$dir/etcd-backup" man "$stage/man"
    "$dir/etcd-wrapper" man "$stage/man"
  fi
done
for dir in "$stage"/etcdkit_*/; do
  name=$(basename "$dir")
  cp "$stage"/man/*.1 "$dir/man/"
  bash "$here/sbom.sh" --licenses "$dir/etcd-wrapper" "$dir/etcd-backup"
  for cmd in etcd-wrapper etcd-backup; do
    mv "$dir/$cmd.cdx.json" "$out/$name.$cmd.cdx.json"
  done
  tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -C "$stage" -czf "$out/$name.tar.gz" "$name"
done
bash "$here/vulncheck.sh"
bash "$here/image.sh" --out "$out/images" --platforms linux/amd64,linux/arm64 --licenses "${push[@]}"
# The chart, packaged by the pinned helm with the release's version as its
# own and the images' tag; pushed beside the images with --push.
"$here/install-emulators.sh" >/dev/null
"$here/bin/helm" package "$root/deploy/helm/etcdkit" --version "${version#v}" --app-version "$version" --destination "$out" >&2
if ((${#push[@]})); then
  "$here/bin/helm" push "$out/etcdkit-${version#v}.tgz" "oci://${push[1]}/charts" >&2
fi
(cd "$out" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
echo "release.sh: etcdkit $version in $out" >&2
