#!/usr/bin/env bash
# Tidies every module of the repository (go.work lists them) as an
# embedder's build would see it: with GOWORK=off, each module reaching its
# siblings through replace directives to their directories. A module keeps
# the replace lines of exactly the etcdkit modules in its graph.
#
#   tools/tidy.sh            the siblings required at the zero pseudo-version
#   tools/tidy.sh vX.Y.Z     at the release's version, which an embedder's
#                            build resolves once every module is tagged
#                            (CONTRIBUTING.md, "Releasing"); the replace
#                            lines keep development on the directories
set -euo pipefail
release=${1:-}
cd "$(dirname "$0")/.."
root=$(pwd)
prefix=github.com/etcdkit/etcdkit
mapfile -t mods < <(go work edit -json | sed -n 's/^\t*"DiskPath": "\(.*\)"$/\1/p')
path() { [[ $1 == . ]] && echo "$prefix" || echo "$prefix/${1#./}"; }
for m in "${mods[@]}"; do
  (
    cd "$root/$m"
    rel=$(realpath --relative-to="$root/$m" "$root")
    edits=()
    for o in "${mods[@]}"; do
      [[ $o == "$m" ]] && continue
      to=$rel/${o#./}
      [[ $o == . ]] && to=$rel
      [[ $to == ../* || $to == . || $to == .. ]] || to=./$to
      edits+=("-replace=$(path "$o")=$to")
    done
    go mod edit "${edits[@]}"
    GOWORK=off go mod tidy
    # Drop the replace lines of modules outside this one's graph.
    mapfile -t graph < <(GOWORK=off go list -m all)
    drops=()
    for o in "${mods[@]}"; do
      [[ $o == "$m" ]] && continue
      p=$(path "$o")
      if ! printf '%s\n' "${graph[@]}" | grep -q "^$p "; then
        drops+=("-dropreplace=$p")
      fi
    done
    if ((${#drops[@]})); then go mod edit "${drops[@]}"; fi
    GOWORK=off go mod tidy
    if [[ -n $release ]]; then
      pins=()
      for o in "${mods[@]}"; do
        p=$(path "$o")
        if [[ $o != "$m" ]] && printf '%s\n' "${graph[@]}" | grep -q "^$p "; then
          pins+=("-require=$p@$release")
        fi
      done
      if ((${#pins[@]})); then go mod edit "${pins[@]}"; fi
    fi
  )
done
