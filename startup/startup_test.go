package startup_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate"
)

// config is the member's configuration as a wrapper would start it.
func config(c *etcdtest.Cluster, m *etcdtest.Member, initial string) startup.Config {
	var eps []string
	for _, o := range c.Members {
		if o != m {
			eps = append(eps, o.ClientURL.String())
		}
	}
	return startup.Config{Member: member.Spec{Name: m.Name, DataDir: m.Dir, PeerURLs: []string{m.PeerURL.String()}, InitialCluster: initial}, ClientURLs: []string{m.ClientURL.String()}, ClusterState: "new", Endpoints: eps}
}

// check validates the member's data dir as a start-up would.
func check(t *testing.T, dir string) startup.Check {
	t.Helper()
	return checkWAL(t, dir, "")
}

// checkWAL validates a data dir whose WAL is walDir ("": its own).
func checkWAL(t *testing.T, dir, walDir string) startup.Check {
	t.Helper()
	r, err := validate.DataDir(context.Background(), dir, validate.Options{MultiMember: true, WALDir: walDir})
	if err != nil {
		t.Fatal(err)
	}
	return startup.Check{Verdict: r.Verdict, Reason: r.Reason}
}

// bringUp decides, applies and starts the member, then promotes it.
func bringUp(t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member, cfg startup.Config, want startup.Action) {
	t.Helper()
	ctx := context.Background()
	// No store: a corrupt member may rejoin because it may wipe its data.
	p, err := startup.Decide(ctx, cfg, checkWAL(t, m.Dir, cfg.Member.WALDir), startup.Options{WipeOnCorrupt: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Action != want {
		t.Fatalf("Decide: %s (%s), want %s", p.Action, p.Reason, want)
	}
	t.Logf("decided %s: %s", p.Action, p.Reason)
	if p, err = startup.Apply(ctx, cfg, p, startup.Options{}); err != nil {
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

func TestScaleUpUnderLoad(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	l := etcdtest.StartLoad(t, cli)
	time.Sleep(300 * time.Millisecond)
	m := c.NewMember(t, "m3")
	initial := ""
	for _, o := range c.Members {
		initial += fmt.Sprintf("%s=%s,", o.Name, o.PeerURL.String())
	}
	bringUp(t, c, m, config(c, m, initial[:len(initial)-1]), startup.JoinAsLearner)
	time.Sleep(300 * time.Millisecond)
	l.Check(t)
	etcdtest.Voters(t, cli, 4)
	c.WaitSameData(t, m)
}

func TestRejoin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		// wal: the members keep their WAL in a wal-dir of its own.
		wal bool
	}{
		{"wiped", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"corrupted", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "member", "snap", "db"), 8192); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"corrupted, with a wal-dir", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, "member", "snap", "db"), 8192); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true, DedicatedWAL: tc.wal})
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
			cfg := config(c, m, initial)
			cfg.Member.WALDir = m.WALDir
			bringUp(t, c, m, cfg, startup.Rejoin)
			l.Check(t)
			etcdtest.Voters(t, cli, 3)
			c.WaitSameData(t, m)
			if tc.name != "wiped" {
				aside, _ := filepath.Glob(m.Dir + ".bak-*")
				if len(aside) != 1 {
					t.Fatalf("the corrupt data dir was not moved aside: %v", aside)
				}
			}
			if tc.wal {
				// The old WAL went aside with its data dir; the new member
				// writes its own to the wal-dir.
				aside, _ := filepath.Glob(m.WALDir + ".bak-*/*.wal")
				fresh, _ := filepath.Glob(m.WALDir + "/*.wal")
				if len(aside) == 0 || len(fresh) == 0 {
					t.Fatalf("the WAL was not moved aside with the data dir (%v) or not written again (%v)", aside, fresh)
				}
				if _, err := os.Stat(filepath.Join(m.Dir, "member", "wal")); !os.IsNotExist(err) {
					t.Fatalf("the rejoined member wrote its WAL into its data dir: %v", err)
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

// wiped stops the cluster's last member and removes its data dir, and
// returns it with its configuration as a wrapper would start it again.
func wiped(t *testing.T, c *etcdtest.Cluster) (*etcdtest.Member, startup.Config) {
	t.Helper()
	m := c.Members[len(c.Members)-1]
	initial := m.InitialCluster
	m.Stop()
	if err := os.RemoveAll(m.Dir); err != nil {
		t.Fatal(err)
	}
	return m, config(c, m, initial)
}

// A member with an empty data dir and the full initial cluster, configured
// to bootstrap, never does while the others run: it rejoins (listed) or
// joins (not listed) as a learner. Only when no member answers does it
// bootstrap.
func TestNoSecondCluster(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	ctx := context.Background()
	m, cfg := wiped(t, c)
	initial := cfg.Member.InitialCluster
	p, err := startup.Decide(ctx, cfg, check(t, m.Dir), startup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Action != startup.Rejoin || p.ClusterState != "existing" || !p.Learner || p.ID == 0 {
		t.Fatalf("listed member with an empty data dir: %+v, want a rejoin as learner", p)
	}
	other := cfg
	other.Member.Name, other.Member.PeerURLs = "m9", []string{"http://127.0.0.1:1"}
	other.Member.InitialCluster = initial + ",m9=http://127.0.0.1:1"
	if p, err = startup.Decide(ctx, other, startup.Check{Verdict: validate.Empty}, startup.Options{}); err != nil {
		t.Fatal(err)
	}
	if p.Action != startup.JoinAsLearner || p.ClusterState != "existing" {
		t.Fatalf("unlisted member with an empty data dir: %+v, want a join as learner", p)
	}
	if want := initial + ",m9=http://127.0.0.1:1"; p.InitialCluster != want {
		t.Fatalf("initial cluster %q, want %q", p.InitialCluster, want)
	}

	// With one of two running there is no quorum: refuse, whatever the
	// machine's load (the member answers as late as it likes).
	c.Members[1].Stop()
	p, _ = startup.Decide(ctx, cfg, startup.Check{Verdict: validate.Empty}, startup.Options{})
	if p.Action != startup.Refuse {
		t.Fatalf("one member of three answers: %+v, want refuse", p)
	}
	t.Log(p.Reason)
	// The others stopped too: every endpoint and peer URL refuses the
	// connection, and the configured bootstrap goes ahead.
	c.Members[0].Stop()
	p, _ = startup.Decide(ctx, cfg, startup.Check{Verdict: validate.Empty}, startup.Options{})
	if p.Action != startup.Bootstrap || p.ClusterState != "new" || p.InitialCluster != initial {
		t.Fatalf("no member answers: %+v, want bootstrap", p)
	}
}

// holding is a TCP proxy to target that accepts connections and forwards
// nothing until released: a member that is stopped (SIGSTOP), slow, or
// behind a network that delays its answers.
type holding struct {
	url     string
	release chan struct{}
	done    func()
}

func holdingProxy(t *testing.T, target url.URL) *holding {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &holding{url: target.Scheme + "://" + l.Addr().String(), release: make(chan struct{})}
	var once sync.Once
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		once.Do(func() { close(h.release) })
		_ = l.Close()
	})
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = in.Close() }()
				select {
				case <-h.release:
				case <-done:
					return
				}
				out, err := net.Dial("tcp", target.Host)
				if err != nil {
					return
				}
				// Either side's end ends both: a member stops gracefully
				// only once its connections close.
				go func() { _, _ = io.Copy(out, in); _ = out.Close(); _ = in.Close() }()
				_, _ = io.Copy(in, out)
				_ = out.Close()
			}()
		}
	}()
	h.done = func() { once.Do(func() { close(h.release) }) }
	return h
}

// A member whose peers accept connections and answer nothing in time
// does not bootstrap: it waits, saying why, and joins once they answer.
// The peer runs without quorum (its cluster's third member is gone) and
// is reached through a proxy that holds every byte, as a stopped process
// or a loaded machine would; a peer URL that holds a cluster's data but
// whose client endpoint is silent is no absence either.
func TestSlowPeerIsNoAbsence(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	ctx := context.Background()
	m, cfg := wiped(t, c)
	c.Members[1].Stop()
	running := c.Members[0]
	client, peer := holdingProxy(t, running.ClientURL), holdingProxy(t, running.PeerURL)
	cfg.Endpoints = []string{client.url}
	cfg.Member.InitialCluster = fmt.Sprintf("%s=%s,%s=%s,%s=%s", running.Name, peer.url, c.Members[1].Name, c.Members[1].PeerURL.String(), m.Name, m.PeerURL.String())
	o := startup.Options{Timeout: 500 * time.Millisecond}
	p, err := startup.Decide(ctx, cfg, startup.Check{Verdict: validate.Empty}, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Action != startup.Refuse || !p.Retry || !strings.Contains(p.Reason, "answered nothing") || !strings.Contains(p.Reason, client.url) {
		t.Fatalf("a silent peer: %+v, want a refusal that retries and names it", p)
	}
	t.Log(p.Reason)
	// The peer URL answers straight: it holds a cluster's data.
	cfg.Member.InitialCluster = strings.Replace(cfg.Member.InitialCluster, peer.url, running.PeerURL.String(), 1)
	if p, _ = startup.Decide(ctx, cfg, startup.Check{Verdict: validate.Empty, Backups: true, Store: true}, o); p.Action != startup.Refuse || !p.Retry || !strings.Contains(p.Reason, "hold a cluster's data") {
		t.Fatalf("a peer with data whose endpoint is silent: %+v, want a refusal that retries", p)
	}
	t.Log(p.Reason)
	// Once it answers, it says it has no quorum: refuse, never bootstrap.
	client.done()
	if p, _ = startup.Decide(ctx, cfg, startup.Check{Verdict: validate.Empty}, startup.Options{}); p.Action != startup.Refuse || !strings.Contains(p.Reason, "no quorum") {
		t.Fatalf("the peer answers without quorum: %+v, want refuse", p)
	}
	// Quorum back: the wiped member rejoins.
	c.Members[1].Restart(t)
	etcdtest.Eventually(t, "the cluster has quorum again", 30*time.Second, func() bool {
		p, _ = startup.Decide(ctx, cfg, check(t, m.Dir), startup.Options{})
		return p.Action == startup.Rejoin
	})
}

// Members of a new cluster started together: a peer that started first
// waits for the others, accepting connections on its client port and
// serving nothing there, and says on its peer port that its cluster has
// not formed. The next member bootstraps beside it, not waits for it.
func TestBootstrapBesideBootstrappingPeer(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	ctx := context.Background()
	for _, m := range c.Members {
		m.Stop()
		if err := os.RemoveAll(m.Dir); err != nil {
			t.Fatal(err)
		}
	}
	first := c.Members[0]
	started := make(chan error, 1)
	go func() { started <- first.StartWith(ctx, first.InitialCluster, "new") }()
	etcdtest.Eventually(t, "the first member's peer port says its cluster waits", 30*time.Second, func() bool {
		resp, err := http.Get(first.PeerURL.String() + "/version")
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "not_decided")
	})
	second := c.Members[1]
	cfg := config(c, second, second.InitialCluster)
	p, err := startup.Decide(ctx, cfg, startup.Check{Verdict: validate.Empty}, startup.Options{Timeout: 500 * time.Millisecond})
	if err != nil || p.Action != startup.Bootstrap {
		t.Fatalf("beside a member that waits for its new cluster: %+v, %v; want bootstrap", p, err)
	}
	if err := second.StartWith(ctx, p.InitialCluster, p.ClusterState); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
}

// A cluster that lost quorum comes back from its backups, with a revision
// past every one its clients saw: a watcher of the lost cluster gets a
// compaction error from the recovered one and lists again, and no revision
// is served twice.
func TestRecoverQuorum(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, TLS: true, UnsafeNoFsync: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := c.Client(t)
	if _, err := (etcdtest.Workload{Ops: 300, Prefix: "/w/", Seed: 3, TxnPercent: 10, DeletePercent: 10}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := etcdtest.ReadAll(ctx, cli, "/", full.LastRevision)
	if err != nil {
		t.Fatal(err)
	}
	// A watcher of the lost cluster sees writes the backup does not hold.
	watcher := c.Client(t)
	events := watcher.Watch(ctx, "/", clientv3.WithPrefix(), clientv3.WithRev(full.LastRevision+1))
	var seen int64
	for i := range 3 {
		put, err := cli.Put(ctx, fmt.Sprintf("/after-backup/%d", i), "lost")
		if err != nil {
			t.Fatal(err)
		}
		seen = put.Header.Revision
	}
	for last := int64(0); last < seen; {
		wr := <-events
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			last = ev.Kv.ModRevision
		}
	}
	var cfgs []startup.Config
	for _, m := range c.Members {
		m.Kill()
		if err := os.RemoveAll(m.Dir); err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, config(c, m, m.InitialCluster))
	}
	res, err := startup.RecoverQuorum(ctx, st, startup.RecoverOptions{
		Members: cfgs, Token: "etcdtest", Conn: c.ClientConfig(),
		Start: func(ctx context.Context, cfg startup.Config, p startup.Plan) error {
			return c.Member(cfg.Member.Name).StartWith(ctx, p.InitialCluster, p.ClusterState)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != full.LastRevision {
		t.Fatalf("restored revision %d, the backup's is %d", res.Revision, full.LastRevision)
	}
	if bumped := res.Revision + int64(res.RevisionBump); bumped <= seen {
		t.Fatalf("recovered at revision %d (bump %d), a watcher saw %d", bumped, res.RevisionBump, seen)
	}
	cli = c.Client(t)
	etcdtest.Voters(t, cli, 3)
	got, _, err := etcdtest.ReadAll(ctx, cli, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("after recovery %d keys, the backup has %d", len(got), len(want))
	}
	for _, m := range c.Members {
		c.WaitSameData(t, m)
	}

	// The watch resumes after the last revision it saw and finds it
	// compacted: the watcher must list again, and what it lists is newer
	// than anything it saw.
	var before clientv3.WatchResponse
	for {
		wr, ok := <-events
		if !ok {
			// A member added back as a learner refuses watches, and the
			// client ends a watch that resumed there: the watcher resumes
			// it again, as any watcher does after an error.
			if err := before.Err(); err != nil && strings.Contains(err.Error(), rpctypes.ErrorDesc(rpctypes.ErrGRPCNotSupportedForLearner)) {
				t.Logf("the watch resumed on a learner (%v); resuming it again", err)
				events, before = watcher.Watch(ctx, "/", clientv3.WithPrefix(), clientv3.WithRev(seen+1)), clientv3.WatchResponse{}
				continue
			}
			t.Fatalf("the watch ended without a compaction error; its last answer: canceled %v, reason %q, error %v", before.Canceled, before.CancelReason, before.Err())
		}
		before = wr
		if wr.CompactRevision != 0 {
			if wr.CompactRevision <= seen {
				t.Fatalf("compacted at %d, the watcher saw %d", wr.CompactRevision, seen)
			}
			break
		}
		if len(wr.Events) > 0 {
			t.Fatalf("the watch resumed with events at revision %d: revisions are served twice", wr.Events[0].Kv.ModRevision)
		}
	}
	list, err := watcher.Get(ctx, "/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	put, err := watcher.Put(ctx, "/after-recovery", "1")
	if err != nil {
		t.Fatal(err)
	}
	if list.Header.Revision <= seen || put.Header.Revision <= list.Header.Revision {
		t.Fatalf("listed at revision %d, wrote at %d; the lost cluster served up to %d", list.Header.Revision, put.Header.Revision, seen)
	}
}

// With TLS and authentication on, a member whose connection is wrong gets
// an error from Decide, not a bootstrap: peers that refuse it are not
// peers that are down. With the right connection it rejoins as a
// learner, which membership changes with the root role allow.
func TestSecureClusterRefusesAWrongConnection(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, TLS: true, Auth: true, UnsafeNoFsync: true})
	ctx := context.Background()
	m, cfg := wiped(t, c)
	stranger := pki.NewCA(t, t.TempDir(), "stranger")
	wrong := c.ClientConfig()
	wrong.TLS.CA = stranger.File
	if p, err := startup.Decide(ctx, cfg, startup.Check{Verdict: validate.Empty}, startup.Options{Conn: wrong}); err == nil || !strings.Contains(err.Error(), "not signed by a CA of") {
		t.Fatalf("Decide with the wrong CA: %+v, %v; want an error", p, err)
	}
	conn := c.ClientConfig()
	p, err := startup.Decide(ctx, cfg, startup.Check{Verdict: validate.Empty}, startup.Options{Conn: conn})
	if err != nil || p.Action != startup.Rejoin {
		t.Fatalf("Decide: %+v, %v; want a rejoin", p, err)
	}
	reader := conn
	reader.User, reader.PasswordFile = "reader", c.Security.PasswordFile("reader")
	if _, err := startup.Apply(ctx, cfg, p, startup.Options{Conn: reader}); err == nil || !strings.Contains(err.Error(), `not "root"`) {
		t.Fatalf("Apply as a user without the root role: %v", err)
	}
	if p, err = startup.Apply(ctx, cfg, p, startup.Options{Conn: conn}); err != nil {
		t.Fatal(err)
	}
	if err := m.StartWith(ctx, p.InitialCluster, p.ClusterState); err != nil {
		t.Fatal(err)
	}
	if err := member.PromoteWhenReady(ctx, c.Client(t), p.ID, member.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A member that restarts while its whole cluster restarts starts at once:
// the check of its membership rights, which asks the cluster, waits for
// nobody when no member listed the cluster. (The fault soak found every
// member of a restarting cluster waiting the whole timeout for it, 30 s,
// with a warning that its user lacked rights it had.)
func TestRestartBesideSilentPeersDoesNotWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	silent := holdingProxy(t, url.URL{Scheme: "http", Host: "127.0.0.1:1"})
	var logs strings.Builder
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := startup.Config{Member: member.Spec{Name: "m0", InitialCluster: "m0=http://127.0.0.1:2,m1=http://127.0.0.1:3"}, Endpoints: []string{silent.url}}
	p := startup.Plan{Action: startup.Restart, Reason: "the data dir is sound"}
	got, err := startup.Carry(ctx, cfg, nil, p, startup.Options{Timeout: time.Hour, Logger: lg})
	if err != nil || got.Action != startup.Restart {
		t.Fatalf("Carry: %+v, %v", got, err)
	}
	if ctx.Err() != nil {
		t.Fatal("Carry waited for the silent cluster")
	}
	if !strings.Contains(logs.String(), "is not checked") || strings.Contains(logs.String(), "fix it now") {
		t.Fatalf("the log does not say the check was skipped, or warns:\n%s", logs.String())
	}
}
