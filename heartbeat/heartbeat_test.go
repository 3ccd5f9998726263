package heartbeat_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/heartbeat"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/store"
)

// Three sidecars of a TLS cluster keep their leases: the member leases
// name the leader and the cluster, the snapshot leases follow the
// uploader's snapshots, a leader move changes the member leases' roles
// within one heartbeat (the member leases are read as etcd-druid's
// quorum-aware updates of DEP-07 read them, to delete followers first:
// "<member-id>:<cluster-id>:<role>", the role Leader or Member), and an
// API server that is gone for a while is counted and caught up
// with while the backups went on.
func TestHeartbeatFollowsTheSidecars(t *testing.T) {
	api, leases := apiServer(t)
	ns := namespace(t, api, "etcd")
	// DEP-04's EtcdMember, whose status each sidecar writes too.
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := api.Kube.Kubectl(t.Context(), nil, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kubectl("apply", "-f", "../deploy/kubernetes/etcdmember-crd.yaml")
	kubectl("wait", "--for=condition=established", "--timeout=60s", "crd/etcdmembers.druid.gardener.cloud")
	cfg, err := heartbeat.RESTConfig(api.Kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, TLS: true, UnsafeNoFsync: true})
	cli := c.Client(t)
	st, err := store.Open(t.Context(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sidecars := map[string]*sidecar.Sidecar{}
	for _, m := range c.Members {
		sc, err := sidecar.New(sidecar.Options{
			Client: c.Client(t), Endpoint: m.ClientURL.String(), WorkDir: t.TempDir(),
			Backups: sidecar.BackupOptions{Store: st, Snapshots: capture.Options{FullSchedule: "@every 1h", DeltaPeriod: 200 * time.Millisecond,
				RetentionPeriod: capture.Off, MinBackoff: 100 * time.Millisecond}},
			Membership: sidecar.MembershipOptions{Follow: member.FollowOptions{Interval: 100 * time.Millisecond}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// A client each, as each sidecar has its own.
		sc2, err := heartbeat.NewStatusClient(cfg, "heartbeat-test", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		hb, err := heartbeat.New(heartbeat.Options{Client: leaseClient(t, api.Kube.Kubeconfig), Namespace: ns, MemberLease: m.Name,
			EtcdMember: m.Name, StatusClient: sc2,
			FullLease: "full-snapshot-revisions", DeltaLease: "delta-snapshot-revisions",
			// A long period: a change of leader is written at once, not at
			// the next renewal; leaderIs waits a third of it.
			Period: 30 * time.Second, DeltaPeriod: time.Second, Create: true, Timeout: 2 * time.Second,
			Registry: sc.Registry()})
		if err != nil {
			t.Fatal(err)
		}
		sidecars[m.Name] = sc
		done := make(chan struct{}, 2)
		go func() { _ = sc.Run(ctx); done <- struct{}{} }()
		go func() { hb.Run(ctx, sc); done <- struct{}{} }()
		t.Cleanup(func() { cancel(); <-done; <-done })
	}

	// roles reads the member leases: each member's ID and role.
	roles := func() (map[string]string, string) {
		got, cluster := map[string]string{}, ""
		for _, m := range c.Members {
			l, err := leases.Get(t.Context(), ns, m.Name)
			if err != nil {
				return nil, ""
			}
			parts := strings.Split(holder(l), ":")
			if len(parts) != 3 || l.Annotations[heartbeat.TLSAnnotation] != "true" {
				return nil, ""
			}
			if role := parts[2]; role != "Leader" && role != "Member" {
				t.Fatalf("member lease %s holds role %q: etcd-druid reads Leader or Member", m.Name, role)
			}
			if cluster != "" && parts[1] != cluster {
				t.Fatalf("member leases name clusters %s and %s", cluster, parts[1])
			}
			cluster = parts[1]
			got[parts[0]] = parts[2]
		}
		return got, cluster
	}
	leaderIs := func(m *etcdtest.Member) {
		t.Helper()
		id := fmt.Sprintf("%x", uint64(m.Etcd().Server.MemberID()))
		etcdtest.Eventually(t, "the member leases name "+m.Name+" the leader", 10*time.Second, func() bool {
			got, _ := roles()
			leaders := 0
			for member, role := range got {
				if role == "Leader" {
					leaders++
					if member != id {
						return false
					}
				}
			}
			return len(got) == 3 && leaders == 1
		})
	}
	leaderIs(c.Leader())
	_, cluster := roles()
	if want := fmt.Sprintf("%x", uint64(c.Leader().Etcd().Server.Cluster().ID())); cluster != want {
		t.Fatalf("member leases name cluster %s, etcd says %s", cluster, want)
	}

	uploader := func() *sidecar.Sidecar { return sidecars[c.Leader().Name] }
	leaseRev := func(name string) int64 {
		l, err := leases.Get(t.Context(), ns, name)
		if err != nil {
			return -1
		}
		rev, err := strconv.ParseInt(holder(l), 10, 64)
		if err != nil {
			return -1
		}
		return rev
	}
	// The first full snapshot, then deltas.
	etcdtest.Eventually(t, "the full snapshot lease holds the first full snapshot", 10*time.Second, func() bool {
		f := uploader().SnapshotStatus().LastFull
		return f.Key != "" && leaseRev("full-snapshot-revisions") == f.LastRevision
	})
	put := func(n int) int64 {
		t.Helper()
		var rev int64
		for i := range n {
			resp, err := cli.Put(t.Context(), fmt.Sprintf("/k/%d", i), "v")
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	rev := put(20)
	etcdtest.Eventually(t, "the delta snapshot lease reaches the last write", 10*time.Second, func() bool {
		return leaseRev("delta-snapshot-revisions") >= rev
	})
	full, err := uploader().Full(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the full snapshot lease advances", 10*time.Second, func() bool {
		l, err := leases.Get(t.Context(), ns, "full-snapshot-revisions")
		return err == nil && holder(l) == strconv.FormatInt(full.LastRevision, 10) && l.Spec.RenewTime.Time.Equal(full.Created)
	})

	// A compaction of the chain is a full snapshot too.
	rev = put(10)
	etcdtest.Eventually(t, "the delta lease reaches the writes before the compaction", 10*time.Second, func() bool {
		return leaseRev("delta-snapshot-revisions") >= rev
	})
	compacted, err := uploader().Compact(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the full snapshot lease holds the compaction's full", 10*time.Second, func() bool {
		return leaseRev("full-snapshot-revisions") == compacted.Snapshot.LastRevision && compacted.Snapshot.LastRevision >= rev
	})

	// A leader move: the roles follow, and so does the uploader's work.
	// The EtcdMembers' transitions name the new roles within the same
	// heartbeat, and the uploader's its snapshots.
	before, old := kubectl("get", "etcdmembers", "--namespace", ns), c.Leader()
	moved := c.MoveLeader(t)
	leaderIs(moved)
	var got string
	defer func() {
		if t.Failed() {
			t.Logf("the EtcdMembers: %s", got)
		}
	}()
	etcdtest.Eventually(t, "the EtcdMembers name "+moved.Name+" the leader", 10*time.Second, func() bool {
		got = kubectl("get", "etcdmembers", "--namespace", ns, "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.transitions[-1:].subState}/{.status.transitions[-1:].reason}/{.status.snapshots.lastFull.endRevision} {end}`)
		for _, m := range c.Members {
			want := m.Name + "=Follower/MemberStarted/"
			switch m {
			case moved:
				want = fmt.Sprintf("%s=Leader/GainedClusterLeadership/%d", m.Name, uploader().SnapshotStatus().LastFull.LastRevision)
			case old:
				want = m.Name + "=Follower/LostClusterLeadership/"
			}
			if !strings.Contains(got, want) {
				return false
			}
		}
		return true
	})
	t.Logf("kubectl get etcdmembers, before the move:\n%safter:\n%s", before, kubectl("get", "etcdmembers", "--namespace", ns))

	// The API server goes away for a while, and the leader moves
	// meanwhile: the backups go on, the failed writes are counted, and
	// the leases catch up once it is back.
	failures := func() (n float64) {
		for _, sc := range sidecars {
			n += failuresOf(t, sc, heartbeat.KindMember) + failuresOf(t, sc, heartbeat.KindDelta)
		}
		return n
	}
	failed := failures()
	api.Halt()
	downAt := time.Now()
	rev = put(20)
	etcdtest.Eventually(t, "the backups go on without the API server", 10*time.Second, func() bool {
		return uploader().SnapshotStatus().LastDelta.LastRevision >= rev
	})
	leader := c.MoveLeader(t)
	rev = put(20)
	etcdtest.Eventually(t, "the backups follow the new leader without the API server", 10*time.Second, func() bool {
		return uploader().SnapshotStatus().LastDelta.LastRevision >= rev
	})
	etcdtest.Eventually(t, "lease failures are counted", 10*time.Second, func() bool { return failures() > failed })
	// The old uploader's last attempt may have been fenced off by the
	// move; the new one's backups have not failed.
	if s := uploader().SnapshotStatus(); s.Failures != 0 {
		t.Fatalf("the uploader's backups failed while the API server was down: %+v", s)
	}
	time.Sleep(time.Until(downAt.Add(5 * time.Second)))
	if err := api.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("the API server was down for %s", time.Since(downAt).Round(time.Millisecond))
	leaderIs(leader)
	etcdtest.Eventually(t, "the delta lease catches up", 15*time.Second, func() bool {
		return leaseRev("delta-snapshot-revisions") >= rev
	})
}

// failuresOf reads etcdkit_heartbeat_failures_total{lease=kind} from the
// sidecar's metrics.
func failuresOf(t *testing.T, sc *sidecar.Sidecar, kind string) float64 {
	t.Helper()
	mfs, err := sc.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "etcdkit_heartbeat_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "lease" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no etcdkit_heartbeat_failures_total{lease=%q}", kind)
	return 0
}
