package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/heartbeat"
	"github.com/etcdkit/etcdkit/internal/emulator"
)

// kube is an API server for a test: the namespace the sidecars' leases
// are in, and an administrator's lease client to read them.
type kube struct {
	t      *testing.T
	api    *emulator.KubeAPI
	ns     string
	leases heartbeat.Client
}

// startKube starts kube-apiserver over an etcd of its own, with TLS
// between them, and makes namespace ns.
func startKube(t *testing.T, ns string) *kube {
	t.Helper()
	etcd := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	sec := etcd.Security
	s := emulator.RequireKube(t, emulator.KubeOptions{Etcd: etcd.Endpoints(), EtcdCA: sec.CA.File,
		EtcdCert: sec.Client.CertFile, EtcdKey: sec.Client.KeyFile})
	k := &kube{t: t, api: s.Kube, ns: ns}
	k.kubectl(nil, "create", "namespace", ns)
	cfg, err := heartbeat.RESTConfig(s.Kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if k.leases, err = heartbeat.NewClient(cfg, "etcd-backup-test", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *kube) kubectl(stdin []byte, args ...string) string {
	k.t.Helper()
	out, err := k.api.Kubectl(k.t.Context(), stdin, args...)
	if err != nil {
		k.t.Fatalf("%v\n%s", err, out)
	}
	return string(out)
}

// apply applies the documents of a manifest whose kinds are among kinds,
// in the namespace.
func (k *kube) apply(manifest string, kinds ...string) {
	k.t.Helper()
	b, err := os.ReadFile(manifest)
	if err != nil {
		k.t.Fatal(err)
	}
	var docs [][]byte
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		for _, kind := range kinds {
			if bytes.Contains(doc, []byte("\nkind: "+kind+"\n")) {
				docs = append(docs, doc)
			}
		}
	}
	k.kubectl(bytes.Join(docs, []byte("\n---\n")), "apply", "--namespace="+k.ns, "-f", "-")
}

// kubeconfig writes a kubeconfig of a token of the service account sa,
// as a pod of that account holds it.
func (k *kube) kubeconfig(sa string) string {
	k.t.Helper()
	token := strings.TrimSpace(k.kubectl(nil, "create", "token", sa, "--namespace="+k.ns, "--duration=2h"))
	path := filepath.Join(k.t.TempDir(), sa+".kubeconfig")
	if err := k.api.WriteKubeconfig(path, token); err != nil {
		k.t.Fatal(err)
	}
	return path
}

// lease reads a lease; nil when it does not exist.
func (k *kube) lease(name string) *coordinationv1.Lease {
	k.t.Helper()
	l, err := k.leases.Get(k.t.Context(), k.ns, name)
	if err != nil {
		return nil
	}
	return l
}

// holder is a lease's holder identity, "" for none or no lease.
func (k *kube) holder(name string) string {
	if l := k.lease(name); l != nil && l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return ""
}

// revision is a snapshot lease's revision, -1 for none.
func (k *kube) revision(name string) int64 {
	rev, err := strconv.ParseInt(k.holder(name), 10, 64)
	if err != nil {
		return -1
	}
	return rev
}

// members reads the member leases as etcd-druid's health check does:
// each member's ID and role, and the one cluster ID they name (the test
// fails when they name two).
func (k *kube) members(names ...string) (roles map[string]string, cluster string) {
	k.t.Helper()
	roles = map[string]string{}
	for _, name := range names {
		parts := strings.Split(k.holder(name), ":")
		if len(parts) != 3 {
			continue
		}
		if cluster != "" && parts[1] != cluster {
			k.t.Fatalf("member leases name clusters %s and %s: etcd-druid reports ClusterIDMismatch", cluster, parts[1])
		}
		cluster, roles[parts[0]] = parts[1], parts[2]
	}
	return roles, cluster
}

// backupReady is etcd-druid's BackupReady condition for both snapshot
// leases renewed: the delta lease within two delta periods, the full one
// within the full schedule's interval.
func (k *kube) backupReady(full, delta string, deltaPeriod, fullInterval time.Duration) error {
	f, d := k.lease(full), k.lease(delta)
	switch {
	case f == nil || d == nil || f.Spec.RenewTime == nil || d.Spec.RenewTime == nil:
		return fmt.Errorf("the snapshot leases are not both renewed: %v %v", f, d)
	case time.Since(d.Spec.RenewTime.Time) >= 2*deltaPeriod:
		return fmt.Errorf("the delta lease was renewed %s ago, more than two delta periods", time.Since(d.Spec.RenewTime.Time))
	case time.Since(f.Spec.RenewTime.Time) >= fullInterval:
		return fmt.Errorf("the full lease was renewed %s ago", time.Since(f.Spec.RenewTime.Time))
	}
	return nil
}
