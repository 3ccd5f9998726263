#!/usr/bin/env bash
# kubeadm's control plane, backed up by the chart and brought back by the
# restore of KUBEADM.md, on a real single-node Kubernetes
# (tools/kubenode.sh --kubeadm-etcd: etcd 3.6 as kubeadm's static pod, with
# kubeadm's flags, certificates and paths under the node's DIR/root):
#
#   1. the chart (deploy/helm/etcdkit, mode node) runs etcd-backup serve
#      beside the static-pod etcd, reading the node's etcd PKI, backing up
#      to the file store on a host path; an EtcdBackup asks for a full and
#      the EtcdSnapshots list the backups;
#   2. objects are written (ConfigMaps, Secrets), some after the full, so
#      the deltas carry them;
#   3. etcd's data is lost (its data dir moved away while it is stopped);
#   4. KUBEADM.md's restore, step by step: the etcd manifest moved away and
#      the API server stopped, etcd-backup restore into etcd's data dir with
#      the revision bump, the manifest back, the API server started;
#   5. every object is back as it was, the node is Ready, writes go on past
#      the lost etcd's revisions, and the sidecar, which refused to back up
#      the empty etcd over the store's history and drilled nothing against
#      it, backs up the restored cluster.
#
#   sudo tools/kubeadm-e2e.sh [--dir DIR] [--keep]
#
# --keep leaves the node running (tools/kubenode.sh down DIR/node stops it).
# By hand only, as tools/druid-e2e.sh: the node's binaries and the images
# take minutes to build, past what CI's budget holds.
set -euo pipefail
# Each go command here works in one module outside the workspace (tools'
# modules, or the library's or the binaries' module as it is released).
export GOWORK=off
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=$here/bin
dir=${TMPDIR:-/tmp}/etcdkit-kubeadm-e2e
keep=
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) sed -n '20p' "$0" >&2; exit 2 ;;
  esac
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
ns=etcd-backup
say() { echo "kubeadm-e2e: $*" >&2; }
kubectl() { timeout 120 "$bin/kubectl" --kubeconfig "$dir/node/kubeconfig" "$@"; }
helm() { timeout 300 "$bin/helm" --kubeconfig "$dir/node/kubeconfig" "$@"; }

# until_ok waits for a command to succeed, up to a deadline in seconds.
until_ok() {
  local what=$1 secs=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      say "$what: not within ${secs}s"
      kubectl get pods -A -o wide 2>&1 | sed 's/^/  /' >&2 || true
      return 1
    fi
    sleep 1
  done
}

cleanup() {
  local rc=$?
  if ((rc != 0)) && [[ -s $dir/node/pids ]]; then
    kubectl -n "$ns" logs daemonset/backup-etcdkit >"$dir/etcd-backup.log" 2>&1 || true
  fi
  [[ -n $keep ]] || "$here/kubenode.sh" down "$dir/node" || true
  ((rc == 0)) || say "failed; logs in $dir/node/logs, the sidecar's in $dir/etcd-backup.log"
}

[[ ! -s $dir/node/pids ]] || { say "$dir/node runs a node: tools/kubenode.sh down $dir/node first"; exit 1; }
rm -rf "$dir/node" "$dir/images" "$dir/bin" "$dir/backups" "$dir/state"
trap cleanup EXIT
"$here/install-emulators.sh"

say "the etcd-backup image and binary"
arch=$(go env GOARCH)
mkdir -p "$dir/bin/linux_$arch" "$dir/backups" "$dir/state"
(cd "$root/cmd" && CGO_ENABLED=0 go build -trimpath -o "$dir/bin/linux_$arch/etcd-backup" ./etcd-backup)
etcdbackup=$dir/bin/linux_$arch/etcd-backup
(cd "$here/image" && go run . -out "$dir/images/etcd-backup" -bin "$dir/bin" -names etcd-backup -platforms "linux/$arch" \
  -repository ghcr.io/etcdkit -tags e2e -version e2e -revision "$(git -C "$root" rev-parse HEAD)" \
  -created "$(date -u +%Y-%m-%dT%H:%M:%SZ)" -ca-version "$(dpkg-query -W -f='${Version}' ca-certificates)") >/dev/null

say "the node, its etcd as kubeadm's static pod"
"$here/kubenode.sh" up "$dir/node" --kubeadm-etcd "$dir/images/etcd-backup"
ip=$(cat "$dir/node/ip")
fs=$dir/node/root
pki=$fs/etc/kubernetes/pki/etcd
kubectl label node kubenode node-role.kubernetes.io/control-plane= >/dev/null
until_ok "etcd's mirror pod" 120 kubectl -n kube-system get pod etcd-kubenode

say "the chart, beside the static pod"
cat >"$dir/values.yaml" <<EOF
mode: node
image: {repository: ghcr.io/etcdkit/etcd-backup, tag: e2e, pullPolicy: Never}
etcd:
  tls:
    hostPKI: {enabled: true, dir: $pki}
store:
  url: file:///var/lib/etcdkit/backups
schedule:
  deltaPeriod: 2s
drillPeriod: 1m
api:
  port: 18080
logFormat: text
extraVolumes:
  - name: backups
    hostPath: {path: $dir/backups, type: DirectoryOrCreate}
extraVolumeMounts:
  - {name: backups, mountPath: /var/lib/etcdkit/backups}
EOF
helm install backup "$root/deploy/helm/etcdkit" --namespace "$ns" --create-namespace -f "$dir/values.yaml" >/dev/null
until_ok "the sidecar's rollout" 120 kubectl -n "$ns" rollout status daemonset/backup-etcdkit --timeout=5s
until_ok "an EtcdSnapshot of the first full" 120 sh -c "'$bin/kubectl' --kubeconfig '$dir/node/kubeconfig' -n $ns get etcdsnapshots -o jsonpath='{.items[*].status.readyToUse}' | grep -q true"

say "objects, a full asked for, and more objects after it"
kubectl create namespace app >/dev/null
for i in $(seq -w 1 100); do
  echo "---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-$i, namespace: app}
data: {value: \"before the full $i\"}"
done | kubectl apply -f - >/dev/null
for i in $(seq 1 10); do
  kubectl -n app create secret generic "secret-$i" --from-literal=password="p-$i-$RANDOM" >/dev/null
done
kubectl -n "$ns" create -f - >/dev/null <<EOF
apiVersion: backup.etcdkit.io/v1alpha1
kind: EtcdBackup
metadata: {name: before-the-disaster}
EOF
until_ok "the full asked for" 120 sh -c "'$bin/kubectl' --kubeconfig '$dir/node/kubeconfig' -n $ns get etcdbackup before-the-disaster -o jsonpath='{.status.phase}' | grep -qx Succeeded"
for i in $(seq -w 1 50); do
  kubectl -n app create configmap "late-$i" --from-literal=value="after the full $i" >/dev/null
done
kubectl -n app patch configmap cm-001 --type merge -p '{"data":{"value":"changed after the full"}}' >/dev/null
kubectl -n app delete configmap cm-002 >/dev/null
# The cluster's revision is a list's resourceVersion; the deltas must reach it.
revision() { kubectl get --raw '/api/v1/namespaces/app/configmaps?limit=1' | grep -o '"resourceVersion":"[0-9]*"' | head -1 | tr -dc 0-9; }
rev=$(revision)
latest() { kubectl -n "$ns" get etcdsnapshots -o jsonpath='{range .items[?(@.status.latest==true)]}{.status.lastRevision}{end}'; }
until_ok "the backups reach revision $rev" 120 sh -c "[ \"\$('$bin/kubectl' --kubeconfig '$dir/node/kubeconfig' -n $ns get etcdsnapshots -o jsonpath='{range .items[?(@.status.latest==true)]}{.status.lastRevision}{end}')\" -ge $rev ]"
echo "--- kubectl get etcdsnapshots,etcdbackups -n $ns"
kubectl -n "$ns" get etcdsnapshots,etcdbackups
objects() { kubectl -n app get configmaps,secrets -o jsonpath='{range .items[*]}{.kind}/{.metadata.name} {.data}{"\n"}{end}' | grep -v kube-root-ca | sort; }
objects >"$dir/state/before"
say "$(wc -l <"$dir/state/before") objects in namespace app at revision $rev (the backups reach $(latest))"

say "the disaster: etcd's data dir is lost"
manifests=$fs/etc/kubernetes/manifests
mv "$manifests/etcd.yaml" "$fs/etc/kubernetes/etcd.yaml.lost-data"
until_ok "etcd to stop" 120 sh -c "! curl -sf --cacert '$pki/ca.crt' --cert '$pki/healthcheck-client.crt' --key '$pki/healthcheck-client.key' https://127.0.0.1:2379/health"
mv "$fs/var/lib/etcd" "$dir/state/etcd-lost"
mv "$fs/etc/kubernetes/etcd.yaml.lost-data" "$manifests/etcd.yaml"
# etcd starts a new, empty cluster on the empty dir: the control plane is
# there, its objects are not.
until_ok "the empty etcd" 120 curl -sf --cacert "$pki/ca.crt" --cert "$pki/healthcheck-client.crt" --key "$pki/healthcheck-client.key" https://127.0.0.1:2379/health
"$here/kubenode.sh" stop-apiserver "$dir/node"
"$here/kubenode.sh" start-apiserver "$dir/node"
if kubectl get namespace app >/dev/null 2>&1; then
  say "namespace app survived the loss of etcd's data: the disaster did not happen"
  exit 1
fi
say "namespace app is gone with etcd's data"

say "KUBEADM.md's restore"
# 1. Stop etcd and the API server: their manifests out of the kubelet's
#    directory (here the API server is a process of the node's).
mkdir -p "$dir/state/manifests"
mv "$manifests/etcd.yaml" "$dir/state/manifests/"
"$here/kubenode.sh" stop-apiserver "$dir/node"
until_ok "etcd to stop" 120 sh -c "! curl -sf --cacert '$pki/ca.crt' --cert '$pki/healthcheck-client.crt' --key '$pki/healthcheck-client.key' https://127.0.0.1:2379/health"
# 2. The restore into etcd's data dir, with the name and peer URL of the
#    manifest, the revision bumped past any the lost etcd served.
start=$SECONDS
"$etcdbackup" restore --store "file://$dir/backups" --etcd-version 3.6 --data-dir "$fs/var/lib/etcd" --name kubenode \
  --initial-cluster "kubenode=https://$ip:2380" --initial-advertise-peer-urls "https://$ip:2380" --revision-bump auto
say "restored in $((SECONDS - start)) s"
# 3. etcd back, then the API server.
mv "$dir/state/manifests/etcd.yaml" "$manifests/"
until_ok "the restored etcd" 120 curl -sf --cacert "$pki/ca.crt" --cert "$pki/healthcheck-client.crt" --key "$pki/healthcheck-client.key" https://127.0.0.1:2379/health
"$here/kubenode.sh" start-apiserver "$dir/node"

say "every object back"
objects >"$dir/state/after"
if ! diff -u "$dir/state/before" "$dir/state/after"; then
  say "the restored objects differ from those before the disaster"
  exit 1
fi
kubectl wait --for=condition=Ready node/kubenode --timeout=120s >/dev/null
kubectl -n app create configmap after-the-restore --from-literal=value=written >/dev/null
after=$(revision)
((after > rev)) || { say "the restored cluster wrote revision $after, not past $rev: watchers would see time go back"; exit 1; }
say "$(wc -l <"$dir/state/after") objects as before; a write after the restore at revision $after (before the loss: $rev)"

say "the sidecar backs the restored cluster up"
until_ok "a chain past revision $after" 180 sh -c "'$etcdbackup' list --store 'file://$dir/backups' -o json | grep -q . && [ \"\$('$bin/kubectl' --kubeconfig '$dir/node/kubeconfig' -n $ns get etcdsnapshots -o jsonpath='{range .items[?(@.status.latest==true)]}{.status.lastRevision}{end}')\" -ge $after ]"
echo "--- etcd-backup list"
"$etcdbackup" list --store "file://$dir/backups"
echo "--- kubectl get etcdsnapshots -n $ns"
kubectl -n "$ns" get etcdsnapshots
verdicts=$(kubectl -n "$ns" get etcdsnapshots -o jsonpath='{.items[*].status.verified.result}')
if [[ $verdicts == *failed* || $verdicts == *mismatch* ]]; then
  say "a drill says the backups are bad: $verdicts"
  exit 1
fi
say "passed"
