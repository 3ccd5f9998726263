package member_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/internal/etcdtest"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate"
)

// config is the member's configuration as a wrapper would start it.
func config(c *etcdtest.Cluster, m *etcdtest.Member, initial string) member.Config {
	var eps []string
	for _, o := range c.Members {
		if o != m {
			eps = append(eps, o.ClientURL.String())
		}
	}
	return member.Config{
		Name: m.Name, DataDir: m.Dir, PeerURLs: []string{m.PeerURL.String()}, ClientURLs: []string{m.ClientURL.String()},
		InitialCluster: initial, ClusterState: "new", Endpoints: eps,
	}
}

// verdict validates the member's data dir as a wrapper would.
func verdict(t *testing.T, dir string) validate.Verdict {
	t.Helper()
	r, err := validate.DataDir(context.Background(), dir, validate.Options{MultiMember: true})
	if err != nil {
		t.Fatal(err)
	}
	return r.Verdict
}

// bringUp decides, applies and starts the member, then promotes it.
func bringUp(t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member, cfg member.Config, want member.Action) {
	t.Helper()
	ctx := context.Background()
	p, err := member.Decide(ctx, cfg, verdict(t, m.Dir), member.DecideOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Action != want {
		t.Fatalf("Decide: %s (%s), want %s", p.Action, p.Reason, want)
	}
	t.Logf("decided %s: %s", p.Action, p.Reason)
	if p, err = member.Apply(ctx, cfg, p, member.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// The new member believes the first peer that answers: Apply returns
	// only once each of them lists it.
	for _, o := range c.Members {
		if o == m || !o.Running() {
			continue
		}
		resp, err := o.Client(t).MemberList(ctx, clientv3.WithSerializable())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(resp.Members, func(x *etcdserverpb.Member) bool { return x.ID == p.ID }) {
			t.Fatalf("%s does not list the added member %x yet", o.Name, p.ID)
		}
	}
	if err := m.StartWith(ctx, p.InitialCluster, p.ClusterState); err != nil {
		t.Fatal(err)
	}
	if err := member.PromoteWhenReady(ctx, c.Client(t), p.ID, member.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
}

// voters checks that the cluster has n members, all voting and healthy,
// one leader among them.
func voters(t *testing.T, cli *clientv3.Client, n int) []member.Status {
	t.Helper()
	st, err := member.Inspect(context.Background(), cli, member.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaders := 0
	for _, s := range st {
		if s.Learner || !s.Healthy() {
			t.Fatalf("member %s: learner=%v err=%v", s.Name, s.Learner, s.Err)
		}
		if s.Leader {
			leaders++
		}
	}
	if len(st) != n || leaders != 1 {
		t.Fatalf("%d members with %d leaders, want %d with 1: %+v", len(st), leaders, n, st)
	}
	return st
}

// sameData checks that the member holds what the cluster holds, at the
// cluster's revision, read from the member alone.
func sameData(t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member) {
	t.Helper()
	ctx := context.Background()
	want, rev, err := etcdtest.ReadAll(ctx, c.Client(t), "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	mc := m.Client(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _, err := etcdtest.ReadAll(ctx, mc, "/", rev, clientv3.WithSerializable())
		if err == nil && maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %s at revision %d: %d keys (err %v), the cluster has %d", m.Name, rev, len(got), err, len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestScaleUpUnderLoad(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	l := etcdtest.StartLoad(t, cli)
	time.Sleep(300 * time.Millisecond)
	m := c.NewMember(t, "m3")
	initial := ""
	for _, o := range c.Members {
		initial += fmt.Sprintf("%s=%s,", o.Name, o.PeerURL.String())
	}
	bringUp(t, c, m, config(c, m, initial[:len(initial)-1]), member.JoinAsLearner)
	time.Sleep(300 * time.Millisecond)
	l.Check(t)
	voters(t, cli, 4)
	sameData(t, c, m)
}

func TestRejoin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"wiped", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupted", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "member", "snap", "db"), 8192); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
			cli := c.Client(t)
			if _, err := (etcdtest.Workload{Ops: 200, Prefix: "/w/", Seed: 1}).Run(context.Background(), cli); err != nil {
				t.Fatal(err)
			}
			// The member that goes is a follower, so the load's client
			// never loses its leader.
			var m *etcdtest.Member
			for _, o := range c.Members {
				if o != c.Leader() {
					m = o
				}
			}
			initial := m.InitialCluster
			l := etcdtest.StartLoad(t, clientv3ForOthers(t, c, m))
			m.Stop()
			tc.damage(t, m.Dir)
			bringUp(t, c, m, config(c, m, initial), member.Rejoin)
			l.Check(t)
			voters(t, cli, 3)
			sameData(t, c, m)
			if tc.name == "corrupted" {
				aside, _ := filepath.Glob(m.Dir + ".bak-*")
				if len(aside) != 1 {
					t.Fatalf("the corrupt data dir was not moved aside: %v", aside)
				}
			}
		})
	}
}

// clientv3ForOthers is a client of every member but m.
func clientv3ForOthers(t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, o := range c.Members {
		if o != m {
			eps = append(eps, o.ClientURL.String())
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// A member with an empty data dir and the full initial cluster, configured
// to bootstrap, never does while the others run: it rejoins (listed) or
// joins (not listed) as a learner. Only when no member answers does it
// bootstrap.
func TestNoSecondCluster(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	ctx := context.Background()
	m := c.Members[2]
	initial := m.InitialCluster
	m.Stop()
	if err := os.RemoveAll(m.Dir); err != nil {
		t.Fatal(err)
	}
	cfg := config(c, m, initial)
	p, err := member.Decide(ctx, cfg, verdict(t, m.Dir), member.DecideOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Action != member.Rejoin || p.ClusterState != "existing" || !p.Learner || p.ID == 0 {
		t.Fatalf("listed member with an empty data dir: %+v, want a rejoin as learner", p)
	}
	other := cfg
	other.Name, other.PeerURLs = "m9", []string{"http://127.0.0.1:1"}
	other.InitialCluster = initial + ",m9=http://127.0.0.1:1"
	if p, err = member.Decide(ctx, other, validate.Empty, member.DecideOptions{}); err != nil {
		t.Fatal(err)
	}
	if p.Action != member.JoinAsLearner || p.ClusterState != "existing" {
		t.Fatalf("unlisted member with an empty data dir: %+v, want a join as learner", p)
	}
	if want := initial + ",m9=http://127.0.0.1:1"; p.InitialCluster != want {
		t.Fatalf("initial cluster %q, want %q", p.InitialCluster, want)
	}

	// The others stopped too: no cluster answers, the configured
	// bootstrap goes ahead. With one of two running there is no quorum:
	// refuse.
	c.Members[1].Stop()
	p, _ = member.Decide(ctx, cfg, validate.Empty, member.DecideOptions{Timeout: time.Second})
	if p.Action != member.Refuse {
		t.Fatalf("one member of three answers: %+v, want refuse", p)
	}
	t.Log(p.Reason)
	c.Members[0].Stop()
	p, _ = member.Decide(ctx, cfg, validate.Empty, member.DecideOptions{Timeout: time.Second})
	if p.Action != member.Bootstrap || p.ClusterState != "new" || p.InitialCluster != initial {
		t.Fatalf("no member answers: %+v, want bootstrap", p)
	}
}

func TestRecoverQuorum(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	ctx := context.Background()
	cli := c.Client(t)
	if _, err := (etcdtest.Workload{Ops: 300, Prefix: "/w/", Seed: 3, TxnPercent: 10, DeletePercent: 10}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := snapshot.Full(ctx, cli, st, snapshot.FullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := etcdtest.ReadAll(ctx, cli, "/", full.LastRevision)
	if err != nil {
		t.Fatal(err)
	}
	// Writes after the backup are lost with the cluster.
	if _, err := cli.Put(ctx, "/after-backup", "lost"); err != nil {
		t.Fatal(err)
	}
	var cfgs []member.Config
	for _, m := range c.Members {
		m.Kill()
		if err := os.RemoveAll(m.Dir); err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, config(c, m, m.InitialCluster))
	}
	res, err := member.RecoverQuorum(ctx, st, member.RecoverOptions{
		Members: cfgs, Token: "etcdtest",
		Start: func(ctx context.Context, cfg member.Config, p member.Plan) error {
			return c.Member(cfg.Name).StartWith(ctx, p.InitialCluster, p.ClusterState)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != full.LastRevision {
		t.Fatalf("restored revision %d, the backup's is %d", res.Revision, full.LastRevision)
	}
	cli = c.Client(t)
	voters(t, cli, 3)
	got, _, err := etcdtest.ReadAll(ctx, cli, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("after recovery %d keys, the backup has %d", len(got), len(want))
	}
	for _, m := range c.Members {
		sameData(t, c, m)
	}
}

// etcd allows one pending learner: a second add waits for the first to go,
// and gives up at its deadline.
func TestAddLearnerWaitsForPendingLearner(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	first, _, err := member.AddLearner(ctx, cli, []string{"http://127.0.0.1:1"}, member.RetryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = member.AddLearner(ctx, cli, []string{"http://127.0.0.1:2"}, member.RetryOptions{Deadline: time.Second})
	if err == nil || !strings.Contains(err.Error(), "too many learner") {
		t.Fatalf("second learner beside a pending one: %v, want a refusal after the deadline", err)
	}
	go func() {
		time.Sleep(time.Second)
		_ = member.Remove(ctx, cli, first.ID, member.RetryOptions{})
	}()
	second, members, err := member.AddLearner(ctx, cli, []string{"http://127.0.0.1:2"}, member.RetryOptions{Deadline: 30 * time.Second})
	if err != nil {
		t.Fatalf("second learner once the first is removed: %v", err)
	}
	if !second.IsLearner || len(members) != 4 {
		t.Fatalf("added %+v, members %d", second, len(members))
	}
}

// A member moves to a new peer URL: update it, restart the member there.
func TestUpdatePeerURLs(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	st := voters(t, cli, 3)
	m := c.Members[2]
	var id uint64
	for _, s := range st {
		if s.Name == m.Name {
			id = s.ID
		}
	}
	m.Stop()
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	if err := member.UpdatePeerURLs(ctx, cli, id, []string{peer.String()}, member.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	m.PeerURL = peer
	m.Restart(t)
	for _, s := range voters(t, cli, 3) {
		if s.Name == m.Name && (len(s.PeerURLs) != 1 || s.PeerURLs[0] != peer.String()) {
			t.Fatalf("member %s has peer URLs %v, want %s", s.Name, s.PeerURLs, peer.String())
		}
	}
	if _, err := cli.Put(ctx, "/after-move", "ok"); err != nil {
		t.Fatal(err)
	}
	sameData(t, c, m)
}

// With TLS and authentication on, a member whose connection is wrong gets
// an error from Decide, not a bootstrap: peers that refuse it are not
// peers that are down. With the right connection it rejoins as a
// learner, which membership changes with the root role allow.
func TestSecureClusterRefusesAWrongConnection(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, TLS: true, Auth: true, UnsafeNoFsync: true})
	ctx := context.Background()
	m := c.Members[2]
	initial := m.InitialCluster
	m.Stop()
	if err := os.RemoveAll(m.Dir); err != nil {
		t.Fatal(err)
	}
	cfg := config(c, m, initial)
	stranger := pki.NewCA(t, t.TempDir(), "stranger")
	wrong := c.ClientConfig()
	wrong.TLS.CA = stranger.File
	if p, err := member.Decide(ctx, cfg, validate.Empty, member.DecideOptions{Conn: wrong}); err == nil || !strings.Contains(err.Error(), "not signed by a CA of") {
		t.Fatalf("Decide with the wrong CA: %+v, %v; want an error", p, err)
	}
	conn := c.ClientConfig()
	p, err := member.Decide(ctx, cfg, validate.Empty, member.DecideOptions{Conn: conn})
	if err != nil || p.Action != member.Rejoin {
		t.Fatalf("Decide: %+v, %v; want a rejoin", p, err)
	}
	reader := conn
	reader.User, reader.PasswordFile = "reader", c.Security.PasswordFile("reader")
	if _, err := member.Apply(ctx, cfg, p, member.ApplyOptions{Conn: reader}); err == nil || !strings.Contains(err.Error(), `not "root"`) {
		t.Fatalf("Apply as a user without the root role: %v", err)
	}
	if p, err = member.Apply(ctx, cfg, p, member.ApplyOptions{Conn: conn}); err != nil {
		t.Fatal(err)
	}
	if err := m.StartWith(ctx, p.InitialCluster, p.ClusterState); err != nil {
		t.Fatal(err)
	}
	if err := member.PromoteWhenReady(ctx, c.Client(t), p.ID, member.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A learner's sidecar and its wrapper both promote it: each returns
// without error, whichever wins. Raft drops a configuration change
// proposed while another is pending, and etcd then times the caller out:
// that is asked again, not a failure.
func TestConcurrentPromotions(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	m := c.NewMember(t, "m3")
	added, members, err := member.AddLearner(ctx, cli, []string{m.PeerURL.String()}, member.RetryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var initial []string
	for _, o := range members {
		name := o.Name
		if o.ID == added.ID {
			name = m.Name
		}
		initial = append(initial, name+"="+o.PeerURLs[0])
	}
	if err := m.StartWith(ctx, strings.Join(initial, ","), "existing"); err != nil {
		t.Fatal(err)
	}
	eps := []string{c.Members[0].ClientURL.String(), c.Members[1].ClientURL.String(), c.Members[2].ClientURL.String()}
	errs := make(chan error, len(eps))
	for _, ep := range eps {
		go func() {
			cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{ep}})
			if err == nil {
				defer func() { _ = cli.Close() }()
				err = member.PromoteWhenReady(ctx, cli, added.ID, member.RetryOptions{Deadline: time.Minute})
			}
			errs <- err
		}()
	}
	for range eps {
		if err := <-errs; err != nil {
			t.Fatalf("a concurrent promotion: %v", err)
		}
	}
	voters(t, cli, 4)
}

// A removal may be answered by the member it removes, which stops before
// it says so: Remove asks again and another member confirms it.
func TestRemoveThroughTheRemovedMember(t *testing.T) {
	for range 3 {
		c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
		victim := c.Members[2]
		id := uint64(victim.Etcd().Server.MemberID())
		cli, err := etcdclient.New(context.Background(), etcdclient.Config{Endpoints: []string{victim.ClientURL.String(), c.Members[0].ClientURL.String()}})
		if err != nil {
			t.Fatal(err)
		}
		err = member.Remove(context.Background(), cli, id, member.RetryOptions{Deadline: 30 * time.Second})
		_ = cli.Close()
		if err != nil {
			t.Fatalf("remove through the removed member: %v", err)
		}
		voters(t, c.Members[0].Client(t), 2)
		c.Close()
	}
}
