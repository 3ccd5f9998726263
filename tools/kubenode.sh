#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, for tools/druid-e2e.sh and
# tools/kubeadm-e2e.sh:
# etcd and kube-apiserver, kube-controller-manager, kube-scheduler, a
# kubelet over containerd and runc (Debian's packages) with the CNI bridge
# plugin, kube-proxy (iptables) and CoreDNS, every Kubernetes binary built
# from the release tools/kube/go.mod pins. No registry is reached: the
# images a test runs are imported into containerd from OCI layouts, and the
# pods' sandbox image (registry.k8s.io/pause) is built here.
#
#   tools/kubenode.sh up DIR [--kubeadm-etcd] [OCI-LAYOUT...]   # start; DIR/kubeconfig is the admin's
#   tools/kubenode.sh down DIR                 # stop everything up started, leave DIR
#   tools/kubenode.sh stop-apiserver|start-apiserver DIR   # the API server alone (a restore of its etcd)
#
# --kubeadm-etcd runs the API server's etcd as kubeadm does: etcd 3.6 in a
# static pod of the kubelet (kube-system/etcd-kubenode), with kubeadm's
# flags, certificates and paths under DIR/root (etc/kubernetes/manifests,
# etc/kubernetes/pki/etcd, var/lib/etcd), serving https on 127.0.0.1:2379
# and the node's address; the API server reaches it with kubeadm's
# apiserver-etcd-client certificate. Without it etcd is a process of its own.
#
# Needs root and Linux. On cgroup v1 (these machines) the kubelet runs with
# failCgroupV1: false, and containerd with restrict_oom_score_adj: the
# sandbox this machine runs in refuses a negative OOM score to containers.
# Host-wide state it changes: iptables rules (kube-proxy's and the CNI's),
# the cni0 bridge and network namespaces; down removes them.
set -euo pipefail
# Each go command here works in one module outside the workspace (tools'
# modules, or the library's or the binaries' module as it is released).
export GOWORK=off
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=$here/bin

usage() { sed -n '11,13p' "$0" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
verb=$1 dir=$2
shift 2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
logs=$dir/logs
sock=$dir/containerd/containerd.sock
arch=$(go env GOARCH)
kubectl() { timeout 120 "$bin/kubectl" --kubeconfig "$dir/kubeconfig" "$@"; }
say() { echo "kubenode: $*" >&2; }

# install builds what the node runs, once per pinned version.
install() {
  local missing=()
  for p in containerd runc iptables conntrack openssl; do
    command -v "$p" >/dev/null || missing+=("$p")
  done
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  if [[ ${#missing[@]} -gt 0 ]]; then
    say "installing ${missing[*]} from Debian"
    apt-get install -y -q "${missing[@]}" >"$dir/apt.log" 2>&1 || { cat "$dir/apt.log" >&2; exit 1; }
  fi
  "$here/install-emulators.sh"
  local stamp=$bin/.kubenode.version want version minor ldflags
  want=$(cat "$here/kube/go.mod" "$here/kube/go.sum" "$here/kube/pause/main.go" "$here/coredns/go.mod" "$here/coredns/go.sum" | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  version=$(cd "$here/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  minor=${version#v1.}
  minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  say "building the kubelet, controller manager, scheduler and kube-proxy $version, and CoreDNS (minutes on a cold cache)"
  (cd "$here/kube" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$bin/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kube-proxy)
  mkdir -p "$bin/pause/linux_$arch"
  (cd "$here/kube" && CGO_ENABLED=0 go build -trimpath -o "$bin/pause/linux_$arch/pause" ./pause)
  (cd "$here/coredns" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w" -o "$bin/coredns" github.com/coredns/coredns)
  echo "$want" >"$stamp"
}

# start runs a program in the background with its log, and records it.
start() {
  local name=$1
  shift
  "$@" >"$logs/$name.log" 2>&1 &
  echo "$! $name" >>"$dir/pids"
}

# until waits for a command to succeed, up to a deadline in seconds.
until_ok() {
  local what=$1 secs=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then
      say "$what: not within ${secs}s; logs in $logs"
      return 1
    fi
    sleep 0.5
  done
}

pki() {
  local p=$dir/pki
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" -days 30 -subj /CN=kubenode-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$p/apiserver.key" -out "$p/apiserver.csr" -subj /CN=kube-apiserver 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,IP:%s,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n' "$ip" >"$p/ext"
  openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -out "$p/apiserver.crt" -days 30 -extfile "$p/ext" 2>/dev/null
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  token=$(openssl rand -hex 16)
  echo "$token,admin,admin,system:masters" >"$p/tokens.csv"
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kubenode
  cluster: {server: "https://$ip:6443", certificate-authority: $p/ca.crt}
users:
- name: admin
  user: {token: $token}
contexts:
- name: kubenode
  context: {cluster: kubenode, user: admin}
current-context: kubenode
EOF
}

# etcd_pki writes kubeadm's etcd certificates under DIR/root: the CA, the
# server's and the peer's (for 127.0.0.1, localhost and the node), the
# health check's client certificate, and the API server's.
etcd_pki() {
  local p=$root_fs/etc/kubernetes/pki/etcd name
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" -days 30 -subj /CN=etcd-ca 2>/dev/null
  for name in server peer; do
    leaf "$p" $name kubenode "subjectAltName=DNS:kubenode,DNS:localhost,IP:127.0.0.1,IP:$ip
extendedKeyUsage=serverAuth,clientAuth"
  done
  leaf "$p" healthcheck-client kube-etcd-healthcheck-client "extendedKeyUsage=clientAuth"
  leaf "$root_fs/etc/kubernetes/pki" apiserver-etcd-client kube-apiserver-etcd-client "extendedKeyUsage=clientAuth"
  chmod 600 "$p"/*.key "$root_fs"/etc/kubernetes/pki/*.key
}

# leaf writes DIR/NAME.crt and .key for common name CN with extensions EXT,
# signed by the etcd CA.
leaf() { # DIR NAME CN EXT
  local ca=$root_fs/etc/kubernetes/pki/etcd
  openssl req -newkey rsa:2048 -nodes -keyout "$1/$2.key" -out "$1/$2.csr" -subj "/CN=$3" 2>/dev/null
  printf '%s\n' "$4" >"$1/$2.ext"
  openssl x509 -req -in "$1/$2.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial -out "$1/$2.crt" -days 30 -extfile "$1/$2.ext" 2>/dev/null
  rm -f "$1/$2.csr" "$1/$2.ext"
}

# etcd_manifest writes kubeadm's etcd static pod (kubeadm 1.34/1.35's
# flags) with the image of etcd 3.6 built here.
etcd_manifest() {
  local m=$root_fs/etc/kubernetes/manifests
  mkdir -p "$m" "$root_fs/var/lib/etcd"
  cat >"$m/etcd.yaml" <<MANIFEST
apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  labels: {component: etcd, tier: control-plane}
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://$ip:2379
spec:
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:$etcd_tag
    imagePullPolicy: Never
    command:
    - /usr/local/bin/etcd
    - --advertise-client-urls=https://$ip:2379
    - --cert-file=/etc/kubernetes/pki/etcd/server.crt
    - --client-cert-auth=true
    - --data-dir=/var/lib/etcd
    - --feature-gates=InitialCorruptCheck=true
    - --initial-advertise-peer-urls=https://$ip:2380
    - --initial-cluster=kubenode=https://$ip:2380
    - --key-file=/etc/kubernetes/pki/etcd/server.key
    - --listen-client-urls=https://127.0.0.1:2379,https://$ip:2379
    - --listen-metrics-urls=http://127.0.0.1:2381
    - --listen-peer-urls=https://$ip:2380
    - --name=kubenode
    - --peer-cert-file=/etc/kubernetes/pki/etcd/peer.crt
    - --peer-client-cert-auth=true
    - --peer-key-file=/etc/kubernetes/pki/etcd/peer.key
    - --peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt
    - --snapshot-count=10000
    - --trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt
    - --watch-progress-notify-interval=5s
    securityContext:
      runAsUser: 0
    livenessProbe:
      httpGet: {host: 127.0.0.1, path: /livez, port: 2381, scheme: HTTP}
      failureThreshold: 8
      periodSeconds: 10
    volumeMounts:
    - {name: etcd-data, mountPath: /var/lib/etcd}
    - {name: etcd-certs, mountPath: /etc/kubernetes/pki/etcd}
  volumes:
  - name: etcd-data
    hostPath: {path: $root_fs/var/lib/etcd, type: DirectoryOrCreate}
  - name: etcd-certs
    hostPath: {path: $root_fs/etc/kubernetes/pki/etcd, type: DirectoryOrCreate}
MANIFEST
}

# etcd_health says whether the static pod's etcd answers /health.
etcd_health() {
  local p=$root_fs/etc/kubernetes/pki/etcd
  curl -sf --cacert "$p/ca.crt" --cert "$p/healthcheck-client.crt" --key "$p/healthcheck-client.key" https://127.0.0.1:2379/health
}

up() {
  [[ $(id -u) == 0 ]] || { say "needs root (containerd, runc, iptables)"; exit 1; }
  local kubeadm=
  if [[ ${1:-} == --kubeadm-etcd ]]; then
    kubeadm=1
    shift
  fi
  [[ ! -s $dir/pids ]] || { say "$dir holds a running node: tools/kubenode.sh down $dir first"; exit 1; }
  install
  etcd_tag=$("$bin/etcd-3.6" --version | awk '/^etcd Version/ {print $3}')-0
  mkdir -p "$logs"
  : >"$dir/pids"
  # The node's address: pods reach the API server and CoreDNS there.
  ip=$(ip -4 route get 192.0.2.255 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}')
  [[ -n $ip ]] || ip=$(ip -4 route show default | awk '{print $9; exit}')
  [[ -n $ip ]] || { say "no IPv4 address to run the node on"; exit 1; }
  echo "$ip" >"$dir/ip"
  pki
  if [[ -n $kubeadm ]]; then
    etcd_pki
    etcd_manifest
    echo kubeadm >"$dir/etcd-mode"
    # The kubelet runs etcd before there is an API server, as kubeadm's
    # does.
    node "$@"
    until_ok "etcd's static pod" 120 etcd_health
  else
    echo process >"$dir/etcd-mode"
    start etcd "$bin/etcd-3.6" --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:23790 \
      --advertise-client-urls http://127.0.0.1:23790 --listen-peer-urls http://127.0.0.1:23800 --unsafe-no-fsync
    until_ok "etcd" 30 curl -sf http://127.0.0.1:23790/health
  fi
  apiserver
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/kubeconfig" \
    --service-account-private-key-file="$dir/pki/sa.key" --root-ca-file="$dir/pki/ca.crt" \
    --use-service-account-credentials=false --leader-elect=false --profiling=false
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$dir/kubeconfig" --leader-elect=false --profiling=false
  [[ -n $kubeadm ]] || node "$@"
  start kube-proxy "$bin/kube-proxy" --kubeconfig="$dir/kubeconfig" --hostname-override=kubenode \
    --cluster-cidr=10.88.0.0/16 --proxy-mode=iptables
  cat >"$dir/Corefile" <<COREFILE
.:53 {
  bind $ip
  errors
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig $dir/kubeconfig kubenode
    pods insecure
    fallthrough in-addr.arpa ip6.arpa
  }
  forward . /etc/resolv.conf
}
COREFILE
  start coredns "$bin/coredns" -conf "$dir/Corefile"
  until_ok "the node's registration" 90 kubectl get node kubenode
  kubectl wait --for=condition=Ready node/kubenode --timeout=90s >/dev/null
  until_ok "the default service account" 60 kubectl get serviceaccount default
  say "up: KUBECONFIG=$dir/kubeconfig (node kubenode at $ip; logs in $logs)"
}

# apiserver starts kube-apiserver over the node's etcd and waits until it
# is ready.
apiserver() {
  local etcd=(--etcd-servers=http://127.0.0.1:23790)
  if [[ $(cat "$dir/etcd-mode") == kubeadm ]]; then
    etcd=(--etcd-servers=https://127.0.0.1:2379 --etcd-cafile="$root_fs/etc/kubernetes/pki/etcd/ca.crt"
      --etcd-certfile="$root_fs/etc/kubernetes/pki/apiserver-etcd-client.crt" --etcd-keyfile="$root_fs/etc/kubernetes/pki/apiserver-etcd-client.key")
  fi
  ip=$(cat "$dir/ip")
  start kube-apiserver "$bin/kube-apiserver" "${etcd[@]}" --bind-address=0.0.0.0 \
    --advertise-address="$ip" --secure-port=6443 --tls-cert-file="$dir/pki/apiserver.crt" \
    --tls-private-key-file="$dir/pki/apiserver.key" --client-ca-file="$dir/pki/ca.crt" \
    --token-auth-file="$dir/pki/tokens.csv" --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$dir/pki/sa.pub" \
    --service-account-signing-key-file="$dir/pki/sa.key" --service-cluster-ip-range=10.96.0.0/24 \
    --kubelet-preferred-address-types=InternalIP --profiling=false
  until_ok "kube-apiserver" 90 kubectl get --raw /readyz
}

# stop_apiserver stops the API server alone, as moving kubeadm's
# kube-apiserver manifest away does.
stop_apiserver() {
  local pid name
  while read -r pid name; do
    [[ $name == kube-apiserver ]] || continue
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    # An API server whose etcd went away first can hang in its shutdown.
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  done <"$dir/pids"
  grep -v ' kube-apiserver$' "$dir/pids" >"$dir/pids.new" || true
  mv "$dir/pids.new" "$dir/pids"
}

# node starts containerd with the images (the sandbox's, kubeadm's etcd
# with --kubeadm-etcd, and the layouts given) and the kubelet.
node() {
  mkdir -p "$dir/containerd" "$dir/cni"
  cat >"$dir/cni/10-kubenode.conflist" <<'EOF'
{"cniVersion": "1.0.0", "name": "kubenode", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "loopback"}]}
EOF
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
  start containerd containerd --config "$dir/containerd/config.toml"
  until_ok "containerd" 30 ctr -a "$sock" version
  # The images: the sandbox's, and those given.
  (cd "$here/image" && go run . -out "$dir/images/pause" -bin "$bin/pause" -names pause -platforms "linux/$arch" -repository registry.k8s.io \
    -tags 3.10 -version 3.10 -revision none -created 2026-01-01T00:00:00Z -ca-version none >/dev/null)
  local layouts=("$dir/images/pause")
  if [[ -n $kubeadm ]]; then
    mkdir -p "$dir/images/bin/linux_$arch"
    cp "$bin/etcd-3.6" "$dir/images/bin/linux_$arch/etcd"
    (cd "$here/image" && go run . -out "$dir/images/etcd" -bin "$dir/images/bin" -names etcd -platforms "linux/$arch" -repository registry.k8s.io \
      -tags "$etcd_tag" -version "$etcd_tag" -revision none -created 2026-01-01T00:00:00Z -ca-version none -description "etcd, as kubeadm runs it" >/dev/null)
    layouts+=("$dir/images/etcd")
  fi
  for layout in "${layouts[@]}" "$@"; do
    tar -C "$layout" -cf "$dir/image.tar" .
    timeout 300 ctr -a "$sock" -n k8s.io images import --all-platforms "$dir/image.tar" >/dev/null
  done
  rm -f "$dir/image.tar"

  cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$sock
clusterDNS: [$ip]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
  [[ -z $kubeadm ]] || echo "staticPodPath: $root_fs/etc/kubernetes/manifests" >>"$dir/kubelet.yaml"
  start kubelet "$bin/kubelet" --config="$dir/kubelet.yaml" --kubeconfig="$dir/kubeconfig" \
    --root-dir="$dir/kubelet" --hostname-override=kubenode --node-ip="$ip"
}

down() {
  if [[ -f $dir/kubeconfig ]] && [[ -s $dir/pids ]]; then
    # Pods first, so their containers stop as Kubernetes stops them.
    kubectl delete pods --all --all-namespaces --wait=false >/dev/null 2>&1 || true
  fi
  if [[ -S $sock ]]; then
    for id in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      timeout 30 ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
  fi
  if [[ -f $dir/pids ]]; then
    while read -r pid name; do
      kill "$pid" 2>/dev/null || true
    done <"$dir/pids"
    while read -r pid name; do
      for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
      kill -9 "$pid" 2>/dev/null || true
    done <"$dir/pids"
    : >"$dir/pids"
  fi
  pkill -f "containerd-shim-runc-v2 -namespace k8s.io .*-address $sock" 2>/dev/null || true
  # What the kubelet mounted (secrets, tokens, volumes) and the sandboxes'
  # network namespaces.
  grep -o " $dir/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do ip netns delete "$ns" 2>/dev/null || true; done
  ip link delete cni0 2>/dev/null || true
  [[ -x $bin/kube-proxy ]] && "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  say "down: $dir kept (logs in $logs)"
}

root_fs=$dir/root
etcd_tag=
[[ -x $bin/etcd-3.6 ]] && etcd_tag=$("$bin/etcd-3.6" --version | awk '/^etcd Version/ {print $3}')-0
case $verb in
  up) up "$@" ;;
  down) down ;;
  stop-apiserver) stop_apiserver ;;
  start-apiserver) apiserver ;;
  *) usage ;;
esac
