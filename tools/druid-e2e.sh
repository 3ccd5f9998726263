#!/usr/bin/env bash
# etcd-druid's pods, as it renders them (deploy/kubernetes/etcd-druid.yaml),
# running etcdkit's images on a real single-node Kubernetes
# (tools/kubenode.sh): three members with TLS on client, peer and the
# backup server, backups to an S3 bucket (versitygw), and the steps an
# operator's Etcd goes through. Each step waits for what it expects with a
# deadline and prints the pods and the leases as etcd-druid reads them.
#
#   sudo tools/druid-e2e.sh [--dir DIR] [--keep] [--from-gardener BIN]
#
# --keep leaves the node running (tools/kubenode.sh down DIR stops it).
# --from-gardener plays the step users take instead: BIN is Gardener's
# etcd-wrapper, which embeds etcd 3.5, built from its source (in a checkout
# of github.com/gardener/etcd-wrapper: CGO_ENABLED=0 go build -mod vendor
# -o BIN .). Three members start with it in etcd-druid's pods, in an image
# of its layout (/etcd-wrapper, user 65532); etcdkit's etcd3.5 wrapper
# image is rolled in member by member, then the cluster steps to 3.6 with
# the etcd3.6 image, gated by /upgrade/check?to=3.6 and a verified full.
# By hand only: building the node's binaries and the images takes minutes,
# the scenario about ten more, past what CI's budget holds.
set -euo pipefail
# Each go command here works in one module outside the workspace (tools'
# modules, or the library's or the binaries' module as it is released).
export GOWORK=off
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=$here/bin
dir=${TMPDIR:-/tmp}/etcdkit-druid-e2e
keep=
gardener=
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --from-gardener) gardener=$(realpath "$2"); shift 2 ;;
    *) sed -n '9p' "$0" >&2; exit 2 ;;
  esac
done
ns=etcd
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
say() { echo "druid-e2e: $*" >&2; }
kubectl() { timeout 300 "$bin/kubectl" --kubeconfig "$dir/node/kubeconfig" --namespace "$ns" "$@"; }

# status prints what etcd-druid reads: the pods and the leases.
status() {
  echo "--- $1"
  kubectl get pods -o wide --no-headers 2>/dev/null | awk '{print "pod", $1, $2, $3, "restarts=" $4, $6}'
  kubectl get leases -o custom-columns=LEASE:.metadata.name,HOLDER:.spec.holderIdentity,RENEWED:.spec.renewTime --no-headers 2>&1 | sed 's/^/lease /'
}

# until_ok waits for a command to succeed, up to a deadline in seconds.
until_ok() {
  local what=$1 secs=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      say "$what: not within ${secs}s"
      status "at the failure"
      return 1
    fi
    sleep 1
  done
}

cleanup() {
  local rc=$?
  if ((rc != 0)) && [[ -s $dir/node/pids ]]; then
    mkdir -p "$dir/pods"
    for pod in $(kubectl get pods -o name 2>/dev/null); do
      for c in etcd backup-restore; do
        kubectl logs "$pod" -c "$c" >"$dir/pods/${pod#pod/}.$c.log" 2>&1 || true
      done
    done
  fi
  if [[ -z $keep ]]; then
    "$here/kubenode.sh" down "$dir/node" || true
    [[ -n ${gw:-} ]] && kill "$gw" 2>/dev/null || true
  fi
  ((rc == 0)) || say "failed; logs in $dir/node/logs, pod logs in $dir/pods"
}

# A run starts from nothing but the images: the node's state, the
# volumes and the bucket of an earlier run go.
[[ ! -s $dir/node/pids ]] || { say "$dir/node runs a node: tools/kubenode.sh down $dir/node first"; exit 1; }
rm -rf "$dir/node" "$dir/pv" "$dir/s3" "$dir/tls" "$dir/pods"
trap cleanup EXIT
say "images, and etcdctl from tools/etcd"
(cd "$here/etcd" && go build -o "$bin/" go.etcd.io/etcd/etcdctl/v3)
say "images"
arch=$(go env GOARCH)
"$here/image.sh" --platforms "linux/$arch" --out "$dir/images" >/dev/null
layouts=("$dir/images/oci")
if [[ -n $gardener ]]; then
  # The etcd its embed module pins names the image, as Gardener tags by
  # the etcd it runs.
  gv=$(go version -m "$gardener" | awk '$1 == "dep" && $2 == "go.etcd.io/etcd/server/v3" { print $3 }')
  [[ -n $gv ]] || { say "$gardener embeds no etcd server: give Gardener's etcd-wrapper"; exit 2; }
  say "Gardener's etcd-wrapper (etcd ${gv#v}) in an image of its layout"
  mkdir -p "$dir/images/gardener-bin/linux_$arch"
  cp "$gardener" "$dir/images/gardener-bin/linux_$arch/etcd-wrapper"
  gimage=europe-docker.pkg.dev/gardener-project/releases/gardener/etcd-wrapper:etcd${gv#v}
  (cd "$here/image" && go run . --out "$dir/images/gardener" --bin "$dir/images/gardener-bin" --names etcd-wrapper \
    --platforms "linux/$arch" --repository europe-docker.pkg.dev/gardener-project/releases/gardener --tags "etcd${gv#v}" \
    --version "$gv" --created "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --ca-version "$(dpkg-query -W -f='${Version}' ca-certificates)" \
    --root --source https://github.com/gardener/etcd-wrapper --description "Gardener's etcd-wrapper, built from its source") >/dev/null
  layouts+=("$dir/images/gardener")
fi
"$here/kubenode.sh" up "$dir/node" "${layouts[@]}"
ip=$(cat "$dir/node/ip")

say "the S3 bucket (versitygw on the node's address)"
mkdir -p "$dir/s3/data" "$dir/s3/versions"
s3port=27190
"$bin/versitygw" --access e2e --secret e2esecret --port "$ip:$s3port" --quiet posix \
  --versioning-dir "$dir/s3/versions" "$dir/s3/data" >"$dir/s3.log" 2>&1 &
gw=$!
mkdir -p "$dir/s3/data/etcd-backups" "$dir/s3/data/etcd-backups-copy"

say "TLS: one CA for client, peer and backup server certificates"
p=$dir/tls
mkdir -p "$p"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" -days 30 -subj /CN=etcd-ca 2>/dev/null
sans="DNS:localhost,IP:127.0.0.1,DNS:etcd-main-local,DNS:etcd-main-client,DNS:etcd-main-client.$ns,DNS:etcd-main-client.$ns.svc"
sans+=",DNS:etcd-main-client.$ns.svc.cluster.local,DNS:*.etcd-main-peer,DNS:*.etcd-main-peer.$ns,DNS:*.etcd-main-peer.$ns.svc"
sans+=",DNS:*.etcd-main-peer.$ns.svc.cluster.local"
for c in server client; do
  openssl req -newkey rsa:2048 -nodes -keyout "$p/$c.key" -out "$p/$c.csr" -subj "/CN=etcd-$c" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$sans" >"$p/$c.ext"
  openssl x509 -req -in "$p/$c.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -out "$p/$c.crt" -days 30 -extfile "$p/$c.ext" 2>/dev/null
done

say "namespace, secrets, volumes"
"$bin/kubectl" --kubeconfig "$dir/node/kubeconfig" create namespace "$ns" >/dev/null
for s in ca-etcd-bundle ca-etcd-peer-bundle; do
  kubectl create secret generic "$s" --from-file=ca.crt="$p/ca.crt" >/dev/null
done
kubectl create secret generic ca-etcdbr-bundle --from-file=ca.crt="$p/ca.crt" >/dev/null
for s in etcd-server-tls etcd-peer-server-tls etcdbr-server-tls; do
  kubectl create secret tls "$s" --cert="$p/server.crt" --key="$p/server.key" >/dev/null
done
for s in etcd-client-tls etcdbr-client-tls; do
  kubectl create secret tls "$s" --cert="$p/client.crt" --key="$p/client.key" >/dev/null
done
kubectl create secret generic etcd-backup --from-literal=accessKeyID=e2e --from-literal=secretAccessKey=e2esecret \
  --from-literal=region=us-east-1 --from-literal=endpoint="http://$ip:$s3port" --from-literal=s3ForcePathStyle=true >/dev/null
# Static volumes for the claims (no provisioner on one node): more than
# three, since a member whose volume is wiped gets a new one.
{
  echo "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer"
  for i in $(seq 0 7); do
    mkdir -p "$dir/pv/$i" && chmod 0777 "$dir/pv/$i"
    echo "---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-$i}
spec:
  capacity: {storage: 16Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local
  hostPath: {path: $dir/pv/$i, type: Directory}"
  done
} | kubectl apply -f - >/dev/null
kubectl patch storageclass local -p '{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"true"}}}' >/dev/null

if [[ -n $gardener ]]; then
  say "etcd-druid's objects, with Gardener's etcd-wrapper and etcdkit's sidecar"
  sed "s|image: ghcr.io/etcdkit/etcd-wrapper:latest|image: $gimage|" "$root/deploy/kubernetes/etcd-druid.yaml" | kubectl apply -f - >/dev/null
else
  say "etcd-druid's objects, with etcdkit's images"
  kubectl apply -f "$root/deploy/kubernetes/etcd-druid.yaml" >/dev/null
fi

ready() { [[ $(kubectl get pods -l app.kubernetes.io/name=etcd-main -o jsonpath='{range .items[*]}{.status.containerStatuses[?(@.name=="etcd")].ready}{"\n"}{end}' | grep -c true) == "$1" ]]; }
until_ok "three members Ready through etcd-druid's probe" 300 ready 3
status "three members Ready"

lease() { kubectl get lease "$1" -o jsonpath='{.spec.holderIdentity}'; }
advanced() { local v; v=$(lease "$1"); [[ -n $v && $v != 0 && $v != "$2" ]]; }
# etcdctl from the node, to the pods' addresses: the certificates name
# the cluster's DNS names, which the node does not resolve, so the
# server's name goes unchecked; the client certificate is checked.
etcdctl() {
  local eps=() i a
  for i in 0 1 2; do
    a=$(kubectl get pod "etcd-main-$i" -o jsonpath='{.status.podIP}' 2>/dev/null) && [[ -n $a ]] && eps+=("https://$a:2379")
  done
  (IFS=,; timeout 60 "$bin/etcdctl" --endpoints="${eps[*]}" --cacert="$p/ca.crt" --cert="$p/client.crt" --key="$p/client.key" \
    --insecure-skip-tls-verify "$@")
}
# write_keys puts /e2e/FROM../e2e/TO, a hundred to a transaction.
write_keys() {
  local from=$1 to=$2 i
  for ((i = from; i <= to; i += 100)); do
    { echo; seq "$i" $((i + 99 < to ? i + 99 : to)) | sed 's|.*|put /e2e/& value-&|'; echo; echo; } | etcdctl txn >/dev/null
  done
}
keys() { etcdctl get /e2e/ --prefix --keys-only | grep -c .; }
voters() { [[ $(etcdctl member list -w json | grep -o '"isLearner":true' | wc -l) == 0 && $(etcdctl member list | wc -l) == 3 ]]; }
# member_ids prints the members' IDs and names, sorted.
member_ids() { etcdctl member list | cut -d, -f1,3 | sort; }

# sidecar asks the backup server (etcd-backup-restore's protocol, over
# TLS) through the client service: METHOD PATH, the body to $dir/answer.
sidecar() {
  local svc
  svc=$(kubectl get service etcd-main-client -o jsonpath='{.spec.clusterIP}')
  timeout 900 curl -s -o "$dir/answer" -w '%{http_code}' --max-time 900 --cacert "$p/ca.crt" \
    --resolve "etcd-main-client.$ns:8080:$svc" -X "$1" "https://etcd-main-client.$ns:8080$2"
}

# roll IMAGE swaps the etcd container's image one pod at a time, from the
# highest ordinal down, as a StatefulSet's rolling update does, holding
# each at its partition until it is checked: the pod on IMAGE, every
# member Ready, the same three voters as before (none removed or
# re-added), every key there, and fifty more written.
roll() {
  local image=$1 i got ids
  ids=$(member_ids)
  kubectl patch statefulset etcd-main --type=merge -p '{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":3}}}}' >/dev/null
  kubectl set image statefulset/etcd-main "etcd=$image" >/dev/null
  on_image() { [[ $(kubectl get pod "etcd-main-$1" -o jsonpath='{.spec.containers[?(@.name=="etcd")].image}') == "$2" ]] && ready 3; }
  same_voters() { voters && [[ $(member_ids) == "$ids" ]]; }
  for i in 2 1 0; do
    kubectl patch statefulset etcd-main --type=merge -p "{\"spec\":{\"updateStrategy\":{\"rollingUpdate\":{\"partition\":$i}}}}" >/dev/null
    until_ok "etcd-main-$i on $image, every member Ready" 300 on_image "$i" "$image"
    until_ok "the same three voters after etcd-main-$i" 120 same_voters
    got=$(keys)
    [[ $got == "$written" ]] || { say "after etcd-main-$i the cluster holds $got of the $written keys"; exit 1; }
    write_keys $((written + 1)) $((written + 50))
    written=$((written + 50))
    kubectl logs "etcd-main-$i" -c etcd | grep -m1 "runs etcd" | cut -c1-200 || true
    status "etcd-main-$i on $image: $got of $got keys, the same voters; $written keys now"
  done
}

# cluster_version prints the cluster version the member at pod $1 reports.
cluster_version() {
  local a
  a=$(kubectl get pod "etcd-main-$1" -o jsonpath='{.status.podIP}')
  timeout 30 curl -s --cacert "$p/ca.crt" --cert "$p/client.crt" --key "$p/client.key" --resolve "etcd-main-local:2379:$a" \
    "https://etcd-main-local:2379/version" | sed -n 's/.*"etcdcluster":"\([^"]*\)".*/\1/p'
}

# from_gardener: the cluster Gardener's etcd-wrapper started takes
# etcdkit's wrapper for its release, then steps to 3.6.
from_gardener() {
  written=200
  [[ $(cluster_version 0) == 3.5.0 ]] || { say "Gardener's cluster runs at $(cluster_version 0), not 3.5.0"; exit 1; }
  say "etcdkit's wrapper for etcd 3.5 rolled into the running cluster, member by member"
  roll ghcr.io/etcdkit/etcd-wrapper:etcd3.5
  status "every member on etcdkit's wrapper, etcd 3.5"

  say "the step to 3.6: the gate, a full verified against the cluster, then member by member"
  safe() { [[ $(sidecar GET "/upgrade/check?to=3.6") == 200 ]]; }
  until_ok "GET /upgrade/check?to=3.6 says safe" 300 safe
  grep -o '"check":"[^"]*","status":"[^"]*","subject":"[^"]*"' "$dir/answer" |
    sed 's/"check":"\([^"]*\)","status":"\([^"]*\)","subject":"\([^"]*\)"/gate: \2 \1 \3/'
  code=$(sidecar POST /snapshot/full)
  [[ $code == 200 ]] || { say "POST /snapshot/full: $code $(cat "$dir/answer")"; exit 1; }
  echo "--- full before the step: $(cat "$dir/answer")"
  local eps=() i a
  for i in 0 1 2; do
    a=$(kubectl get pod "etcd-main-$i" -o jsonpath='{.status.podIP}') && eps+=("https://$a:2379")
  done
  (IFS=,; AWS_ACCESS_KEY_ID=e2e AWS_SECRET_ACCESS_KEY=e2esecret AWS_REGION=us-east-1 timeout 600 \
    "$dir/images/bin/linux_$arch/etcd-backup" verify --store "s3://etcd-backups/etcd-main?endpoint=http://$ip:$s3port&path-style=true" \
    --against "${eps[*]}" --cacert "$p/ca.crt" --cert "$p/client.crt" --key "$p/client.key" --server-name etcd-main-local \
    --work-dir "$dir" 2>&1 | tail -6)
  roll ghcr.io/etcdkit/etcd-wrapper:etcd3.6
  at36() { [[ $(cluster_version 0) == 3.6.0 ]]; }
  until_ok "the cluster version 3.6.0" 120 at36
  got=$(keys)
  [[ $got == "$written" ]] || { say "after the step the cluster holds $got of the $written keys"; exit 1; }
  status "stepped to 3.6: cluster version $(cluster_version 0), $got of $written keys"
}

until_ok "the full snapshot lease" 120 advanced etcd-main-full-snap ""
write_keys 1 200
until_ok "the delta snapshot lease" 120 advanced etcd-main-delta-snap ""
status "backups: 200 keys written, the snapshot leases advance"

if [[ -n $gardener ]]; then
  from_gardener
  say "passed"
  exit 0
fi

say "a member's pod deleted with its volume wiped: it comes back as a learner and is promoted"
before=$(lease etcd-main-1)
kubectl delete pvc etcd-main-etcd-main-1 --wait=false >/dev/null
kubectl delete pod etcd-main-1 >/dev/null
rejoined() { local v; v=$(lease etcd-main-1); [[ -n $v && ${v%%:*} != "${before%%:*}" ]] && ready 3; }
until_ok "etcd-main-1 back with a new member ID and Ready" 300 rejoined
until_ok "three voters, no learner left" 120 voters
grep -h "learner" <(kubectl logs etcd-main-1 -c etcd) <(kubectl logs etcd-main-1 -c backup-restore) | head -3 | cut -c1-300 || true
got=$(keys)
[[ $got == 200 ]] || { say "after the rejoin the cluster holds $got of the 200 keys"; exit 1; }
status "etcd-main-1 rejoined (member ${before%%:*} replaced), 200 of 200 keys"

# job N prints the Nth Job of etcd-druid-jobs.yaml.
job() { awk -v n="$1" 'BEGIN{RS="\n---\n"} NR==n' "$root/deploy/kubernetes/etcd-druid-jobs.yaml"; }
complete() { [[ $(kubectl get job "$1" -o jsonpath='{.status.succeeded}') == 1 ]]; }
failed() { [[ -n $(kubectl get job "$1" -o jsonpath='{.status.failed}') ]]; }
run_job() {
  job "$1" | kubectl apply -f - >/dev/null
  local end=$((SECONDS + 300))
  until complete "$2"; do
    if failed "$2" || ((SECONDS >= end)); then
      say "job $2 did not complete"; kubectl describe job "$2" | tail -20; kubectl logs "job/$2" --all-containers | tail -40
      return 1
    fi
    sleep 2
  done
  kubectl logs "job/$2" | tail -4 | cut -c1-300
}

say "etcd-druid's compaction Job folds the chain into a new full and writes it to the full snapshot lease"
write_keys 201 300
until_ok "the delta snapshot lease past the new keys" 120 advanced etcd-main-delta-snap "$(lease etcd-main-delta-snap)"
full_before=$(lease etcd-main-full-snap)
run_job 1 etcd-main-compactor
compacted() { local f d; f=$(lease etcd-main-full-snap); d=$(lease etcd-main-delta-snap); [[ $f != "$full_before" ]] && ((f >= d)); }
until_ok "the full snapshot lease holds the compacted full" 60 compacted
status "compacted: full snapshot lease $full_before -> $(lease etcd-main-full-snap)"

say "hibernation: the final full as EtcdOpsTask asks it (POST over TLS to the client service), then no replicas"
code=$(sidecar POST "/snapshot/full?final=true")
[[ $code == 200 ]] || { say "POST /snapshot/full?final=true: $code $(cat "$dir/answer")"; exit 1; }
echo "--- final full: $(cat "$dir/answer")"
kubectl scale statefulset etcd-main --replicas=0 >/dev/null
gone() { [[ -z $(kubectl get pods -l app.kubernetes.io/name=etcd-main -o name) ]]; }
until_ok "the members stopped" 180 gone
status "hibernated"

say "etcd-druid's copy-backups Job copies the hibernated cluster's backups once the final full is there"
run_job 2 etcd-main-copy-worker
copied=$(find "$dir/s3/data/etcd-backups-copy/etcd-main/v2" -maxdepth 1 -name 'Full-*' | wc -l)
((copied >= 1)) || { say "the copy holds no full snapshot"; exit 1; }
status "copied: $(find "$dir/s3/data/etcd-backups-copy/etcd-main/v2" -maxdepth 1 -type f | wc -l) objects, $copied fulls"

# The volumes go, as when a control plane moves to a new seed, and the
# cluster wakes as an Etcd of one replica (etcd-druid's ConfigMap for one
# member), then is scaled to three as etcd-druid scales it: the ConfigMap
# lists three again and the new members join as learners.
say "wake-up with one replica and no volumes: the member restores the backups"
kubectl delete pvc -l app.kubernetes.io/part-of=etcd-main --wait=true >/dev/null 2>&1 || true
kubectl delete pvc etcd-main-etcd-main-0 etcd-main-etcd-main-1 etcd-main-etcd-main-2 --ignore-not-found --wait=true >/dev/null
kubectl get configmap etcd-main-config -o yaml | sed '/resourceVersion:/d' >"$dir/config-3.yaml"
sed -e 's|initial-cluster: etcd-main-0=\([^,]*\),.*|initial-cluster: etcd-main-0=\1|' -e '/^      etcd-main-[12]:$/{N;d}' \
  "$dir/config-3.yaml" >"$dir/config-1.yaml"
kubectl replace -f "$dir/config-1.yaml" >/dev/null
kubectl scale statefulset etcd-main --replicas=1 >/dev/null
until_ok "one member Ready after the wake-up" 300 ready 1
got=$(keys)
[[ $got == 300 ]] || { say "after the wake-up the member holds $got of the 300 keys"; exit 1; }
status "woken up with one member: 300 of 300 keys"

say "scale 1 -> 3"
kubectl replace -f "$dir/config-3.yaml" >/dev/null
kubectl scale statefulset etcd-main --replicas=3 >/dev/null
until_ok "three members Ready after the scale-up" 300 ready 3
until_ok "three voters, no learner left" 120 voters
got=$(keys)
[[ $got == 300 ]] || { say "after the scale-up the cluster holds $got of the 300 keys"; exit 1; }
status "scaled to three: 300 of 300 keys"

say "passed"
