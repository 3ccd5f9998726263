package heartbeat_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/heartbeat"
	"github.com/etcdkit/etcdkit/internal/emulator"
)

// apiServer starts a kube-apiserver over an etcd member of its own, with
// TLS between them, and returns it with an administrator's lease client.
func apiServer(t *testing.T) (*emulator.Server, heartbeat.Client) {
	t.Helper()
	etcd := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	sec := etcd.Security
	s := emulator.RequireKube(t, emulator.KubeOptions{Etcd: etcd.Endpoints(), EtcdCA: sec.CA.File,
		EtcdCert: sec.Client.CertFile, EtcdKey: sec.Client.KeyFile})
	return s, leaseClient(t, s.Kube.Kubeconfig)
}

func leaseClient(t *testing.T, kubeconfig string) heartbeat.Client {
	t.Helper()
	cfg, err := heartbeat.RESTConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := heartbeat.NewClient(cfg, "heartbeat-test", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// namespace makes a namespace for one test.
func namespace(t *testing.T, s *emulator.Server, name string) string {
	t.Helper()
	if out, err := s.Kube.Kubectl(t.Context(), nil, "create", "namespace", name); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return name
}

func getLease(t *testing.T, c heartbeat.Client, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := c.Get(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return "<nil>"
	}
	return *l.Spec.HolderIdentity
}

// The leases' contents are etcd-backup-restore's: the member lease's
// holder and annotation, snapshot revisions that never go back, the full
// lease renewed at the snapshot's time and the delta lease now.
func TestLeasesFormat(t *testing.T) {
	s, c := apiServer(t)
	ns := namespace(t, s, "shoot--p--c")
	ctx := t.Context()
	// etcd-druid makes the leases empty.
	for _, name := range []string{"etcd-main-0", "etcd-main-full-snap", "etcd-main-delta-snap"} {
		if _, err := c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	l := heartbeat.Leases{Client: c, Namespace: ns}

	yes := true
	before := time.Now().Add(-time.Second)
	if err := l.RenewMember(ctx, "etcd-main-0", heartbeat.Member{ID: 0x8e9e05c52164694d, ClusterID: 0xcdf818194e3a8c32, Leader: true, PeerTLS: &yes}); err != nil {
		t.Fatal(err)
	}
	m := getLease(t, c, ns, "etcd-main-0")
	if holder(m) != "8e9e05c52164694d:cdf818194e3a8c32:Leader" || m.Annotations[heartbeat.TLSAnnotation] != "true" {
		t.Fatalf("member lease: holder %s, annotations %v", holder(m), m.Annotations)
	}
	if m.Spec.RenewTime == nil || m.Spec.RenewTime.Time.Before(before) {
		t.Fatalf("member lease renewed at %v, want now", m.Spec.RenewTime)
	}
	if err := l.RenewMember(ctx, "etcd-main-0", heartbeat.Member{ID: 0x1, ClusterID: 0x2}); err != nil {
		t.Fatal(err)
	}
	if m := getLease(t, c, ns, "etcd-main-0"); holder(m) != "1:2:Member" || m.Annotations[heartbeat.TLSAnnotation] != "true" {
		t.Fatalf("member lease without a TLS answer: holder %s, annotations %v (the annotation stays)", holder(m), m.Annotations)
	}

	// Delta first: 0 before any delta, then revisions, never back.
	if err := l.UpdateDelta(ctx, "etcd-main-delta-snap", 0); err != nil {
		t.Fatal(err)
	}
	if d := getLease(t, c, ns, "etcd-main-delta-snap"); holder(d) != "0" || d.Spec.RenewTime == nil {
		t.Fatalf("delta lease before any delta: holder %s renewed %v", holder(d), d.Spec.RenewTime)
	}
	for _, rev := range []int64{120, 90} {
		if err := l.UpdateDelta(ctx, "etcd-main-delta-snap", rev); err != nil {
			t.Fatal(err)
		}
	}
	d := getLease(t, c, ns, "etcd-main-delta-snap")
	if holder(d) != "120" || d.Spec.RenewTime.Time.Before(before) {
		t.Fatalf("delta lease after 120 then 90: holder %s renewed %v", holder(d), d.Spec.RenewTime)
	}

	taken := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if err := l.UpdateFull(ctx, "etcd-main-full-snap", 100, taken); err != nil {
		t.Fatal(err)
	}
	if err := l.UpdateFull(ctx, "etcd-main-full-snap", 80, taken.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f := getLease(t, c, ns, "etcd-main-full-snap")
	if holder(f) != "100" || !f.Spec.RenewTime.Time.Equal(taken) {
		t.Fatalf("full lease after 100 then 80: holder %s renewed %v, want 100 at %v", holder(f), f.Spec.RenewTime, taken)
	}

	// etcd-druid's leases are its own to make; the sidecar's own it makes.
	err := l.RenewMember(ctx, "etcd-main-1", heartbeat.Member{ID: 1, ClusterID: 2})
	if !errors.Is(err, heartbeat.ErrMissing) || !strings.Contains(err.Error(), ns+"/etcd-main-1") {
		t.Fatalf("a missing lease: %v", err)
	}
	own := heartbeat.Leases{Client: c, Namespace: ns, Create: true}
	if err := own.UpdateFull(ctx, "full-snapshot-revisions", 7, taken); err != nil {
		t.Fatal(err)
	}
	if f := getLease(t, c, ns, "full-snapshot-revisions"); holder(f) != "7" {
		t.Fatalf("a lease made on first write holds %s", holder(f))
	}
}
