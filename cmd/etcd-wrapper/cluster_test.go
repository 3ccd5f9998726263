package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar/api"
	s3store "github.com/etcdkit/etcdkit/store/s3"
)

// acked logs every write the cluster acknowledged, with its revision.
type acked struct {
	mu       sync.Mutex
	writes   map[string]int64
	failures []error
	stop     context.CancelFunc
	done     chan struct{}
}

func writeLoad(cli *clientv3.Client) *acked {
	ctx, cancel := context.WithCancel(context.Background())
	a := &acked{writes: map[string]int64{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for i := 0; ctx.Err() == nil; i++ {
			key := fmt.Sprintf("/acked/%06d", i)
			pctx, c := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := cli.Put(pctx, key, key)
			c()
			a.mu.Lock()
			if err != nil {
				a.failures = append(a.failures, err)
			} else {
				a.writes[key] = resp.Header.Revision
			}
			a.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return a
}

func (a *acked) end() { a.stop(); <-a.done }

// Three members, each a wrapper and a sidecar process, backups on the S3
// emulator. Under writes, one member is killed and its database
// corrupted: it comes back as a learner, is promoted, and no write fails.
// Then every member is killed and every data dir deleted: the first
// wrapper restores from the store, the others join it, and every write
// acknowledged up to the last uploaded delta is there.
//
// With TLS and auth, the members serve clients and peers over TLS with
// client certificates required, authentication is on, the sidecars serve
// their API over HTTPS and forward to each other with client
// certificates, the leader moves once and a follower restarts; the
// wrappers have no flag for any of it, and the restored cluster keeps its
// users.
func TestClusterRejoinsAndRecovers(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		clusterRejoinsAndRecovers(t, nil)
	})
	t.Run("TLS and auth", func(t *testing.T) {
		t.Parallel()
		clusterRejoinsAndRecovers(t, newSecure(t))
	})
}

func clusterRejoinsAndRecovers(t *testing.T, sec *secure) {
	srv := emulator.Shared(t, emulator.S3)
	s3 := awss3.New(awss3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	bucket := emulator.Bucket(t)
	if _, err := s3.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	storeURL := "s3://" + bucket + "/e2e?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1"
	// The processes take the credentials from their environment; the test
	// reads the store with them given, so the two variants run at once.
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"AWS_CONFIG_FILE=" + filepath.Join(work, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(work, "none")}
	st, err := s3store.New(context.Background(), s3store.Config{Bucket: bucket, Prefix: "e2e", Endpoint: srv.Endpoint, PathStyle: true,
		Region: "us-east-1", AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(work, "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := newNodes(t, 3, sec)
	wrappers := map[string]*proc{}
	sidecars := map[string]*proc{}
	apis := map[string]string{}
	var peers []string
	for _, nd := range nodes {
		port, err := etcdtest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		apis[nd.name] = fmt.Sprintf("%s://127.0.0.1:%d", sec.scheme(), port)
		peers = append(peers, nd.name+"="+apis[nd.name])
	}
	startWrapper := func(nd *node) {
		wrappers[nd.name] = start(t, "wrapper "+nd.name, wrapperBin, env, "--config", nd.config, "--listen", nd.health,
			"--store", storeURL, "--peer-endpoints", others(nodes, nd), "--log-format", "text")
	}
	startSidecar := func(nd *node) {
		sidecars[nd.name] = start(t, "sidecar "+nd.name, backupBin, env, append([]string{"serve", "--store", storeURL, "--endpoints", endpoints(nodes),
			"--member-endpoint", nd.client, "--listen", strings.TrimPrefix(strings.TrimPrefix(apis[nd.name], "http://"), "https://"),
			"--token-file", token, "--peers", strings.Join(peers, ","),
			"--delta-period", "200ms", "--full-schedule", "@every 1h", "--gc-period", "0s", "--follow-interval", "100ms",
			"--work-dir", t.TempDir()}, sec.backupFlags()...)...)
	}
	for _, nd := range nodes {
		startWrapper(nd)
	}
	for _, nd := range nodes {
		nd.ready(t, 60*time.Second)
	}
	cli := client(t, endpoints(nodes), sec)
	ctx := context.Background()
	if sec != nil {
		cli = sec.enableAuth(t, cli)
	}
	for _, nd := range nodes {
		startSidecar(nd)
	}
	if sec != nil {
		// A full snapshot asked of a follower's sidecar over HTTPS, with a
		// client certificate: the follower forwards it to the leader's
		// sidecar, with its own.
		leader := leaderName(t, cli)
		for _, nd := range nodes {
			if nd.name == leader {
				continue
			}
			var full api.SnapshotView
			etcdtest.Eventually(t, "a follower's sidecar forwards a full snapshot", 30*time.Second, func() bool {
				var err error
				full, err = sec.sidecar(apis[nd.name]).Full(ctx)
				return err == nil
			})
			t.Logf("full snapshot %s through %s's sidecar", full.Key, nd.name)
			break
		}
		// The leader moves: the new leader's sidecar continues the chain.
		load := writeLoad(cli)
		to := moveLeader(t, cli, sec, leader)
		resp, err := cli.Put(ctx, "/after-move", "x")
		if err != nil {
			t.Fatal(err)
		}
		etcdtest.Eventually(t, "the backups reach a write after the leader moved to "+to, 30*time.Second, func() bool {
			return lastBackedUpIn(t, st) >= resp.Header.Revision
		})
		load.end()
		// A follower stopped and started again restarts on its data dir.
		for _, nd := range nodes {
			if nd.name == to {
				continue
			}
			if err := wrappers[nd.name].term(t); err != nil {
				t.Fatalf("%s after SIGTERM: %v", nd.name, err)
			}
			startWrapper(nd)
			nd.ready(t, 60*time.Second)
			if out := wrappers[nd.name].output(); !logged(out, "clean_shutdown=true", "verdict=Valid") || !logged(out, "startup: decided", "action=restart") {
				t.Fatalf("%s did not restart on its data dir:\n%s", nd.name, out)
			}
			break
		}
	}

	// A follower is killed and its database corrupted. The writes go
	// through the two others: a request in flight on the killed member's
	// own connection fails with it, which says nothing of the cluster.
	leader := leaderName(t, cli)
	var victim *node
	for _, nd := range nodes {
		if nd.name != leader {
			victim = nd
		}
	}
	load := writeLoad(client(t, others(nodes, victim), sec))
	time.Sleep(2 * time.Second)
	wrappers[victim.name].kill(t)
	corrupt(t, victim.dir)
	startWrapper(victim)
	victim.ready(t, 60*time.Second)
	etcdtest.Eventually(t, victim.name+" is promoted", 60*time.Second, func() bool { return allVote(ctx, cli, 3) })
	// The sidecar may promote the learner a moment before the wrapper's
	// own call returns and logs it.
	etcdtest.Eventually(t, "the wrapper logs the promotion", 15*time.Second, func() bool {
		return strings.Contains(wrappers[victim.name].output(), "promoted")
	})
	out := wrappers[victim.name].output()
	for _, want := range []string{"verdict=Corrupt", "action=rejoin", "added as learner"} {
		if !strings.Contains(out, want) {
			t.Errorf("the rejoining wrapper's log does not say %q", want)
		}
	}
	time.Sleep(time.Second)
	load.end()
	if len(load.failures) > 0 {
		t.Fatalf("%d writes failed while %s rejoined, the first: %v", len(load.failures), victim.name, load.failures[0])
	}
	t.Logf("%d writes acknowledged, none failed, while %s rejoined", len(load.writes), victim.name)

	// Quorum loss: everything killed, every data dir deleted, once the
	// store holds enough of this load's writes for the check below to
	// mean something (a loaded machine writes fewer in a given time).
	load = writeLoad(cli)
	etcdtest.Eventually(t, "60 of the load's writes backed up", 60*time.Second, func() bool {
		backedUp := lastBackedUpIn(t, st)
		n := 0
		load.mu.Lock()
		for _, rev := range load.writes {
			if rev <= backedUp {
				n++
			}
		}
		load.mu.Unlock()
		return n >= 60
	})
	for _, p := range sidecars {
		p.kill(t)
	}
	for _, p := range wrappers {
		p.kill(t)
	}
	load.end()
	backedUp := lastBackedUpIn(t, st)
	for _, nd := range nodes {
		if err := os.RemoveAll(filepath.Dir(nd.dir)); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range nodes {
		startWrapper(nd)
	}
	for _, nd := range nodes {
		nd.ready(t, 120*time.Second)
	}
	if !strings.Contains(wrappers[nodes[0].name].output(), "startup: restored") {
		t.Fatalf("the first wrapper did not restore:\n%s", wrappers[nodes[0].name].output())
	}
	// With authentication, the restored cluster logs root in: its users
	// came back with the data.
	cli = client(t, endpoints(nodes), sec)
	etcdtest.Eventually(t, "all three members vote", 90*time.Second, func() bool { return allVote(ctx, cli, 3) })
	resp, err := cli.Get(ctx, "/acked/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value) == string(kv.Key)
	}
	checked := 0
	for key, rev := range load.writes {
		if rev > backedUp {
			continue
		}
		checked++
		if !got[key] {
			t.Errorf("%s, acknowledged at revision %d, before the last backup (%d), is missing", key, rev, backedUp)
		}
	}
	if checked < 50 {
		t.Fatalf("only %d acknowledged writes were backed up before the kill: the test shows nothing", checked)
	}
	t.Logf("the store reached revision %d; %d of %d acknowledged writes were before it, all present", backedUp, checked, len(load.writes))
	if sec != nil {
		if st, err := cli.AuthStatus(ctx); err != nil || !st.Enabled {
			t.Fatalf("the restored cluster's authentication: %v, %v", st, err)
		}
	}
	for _, p := range wrappers {
		if err := p.term(t); err != nil {
			t.Errorf("%s after SIGTERM: %v", p.name, err)
		}
	}
}

// moveLeader hands leadership from the member called from to another and
// returns the new leader's name.
func moveLeader(t *testing.T, cli *clientv3.Client, sec *secure, from string) string {
	t.Helper()
	ctx := context.Background()
	st, err := member.Inspect(ctx, cli, member.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == from {
			// Only the leader hands leadership over.
			if _, err := client(t, strings.Join(s.ClientURLs, ","), sec).MoveLeader(ctx, next(st, from).ID); err != nil {
				t.Fatal(err)
			}
			return next(st, from).Name
		}
	}
	t.Fatalf("no member %s", from)
	return ""
}

// next is a member other than the one called name.
func next(st []member.Status, name string) member.Status {
	for _, s := range st {
		if s.Name != name {
			return s
		}
	}
	return member.Status{}
}

// allVote says whether the cluster has n members, all voting and healthy.
func allVote(ctx context.Context, cli *clientv3.Client, n int) bool {
	st, err := member.Inspect(ctx, cli, member.InspectOptions{})
	if err != nil || len(st) != n {
		return false
	}
	for _, s := range st {
		if s.Learner || !s.Healthy() {
			return false
		}
	}
	return true
}

func leaderName(t *testing.T, cli *clientv3.Client) string {
	t.Helper()
	st, err := member.Inspect(context.Background(), cli, member.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Leader {
			return s.Name
		}
	}
	t.Fatal("no leader")
	return ""
}
