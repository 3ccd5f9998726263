package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// kineDatastore is kine over SQLite with TLS and client certificates, and
// the flags and client that reach it.
type kineDatastore struct {
	srv  *emulator.Server
	conn []string
	cli  *clientv3.Client
}

func startKine(t *testing.T, ca *pki.CA, server, client pki.Leaf) kineDatastore {
	t.Helper()
	return startKineOn(t, ca, server, client, "")
}

// startKineOn is startKine over a datastore endpoint ("": SQLite).
func startKineOn(t *testing.T, ca *pki.CA, server, client pki.Leaf, datastore string) kineDatastore {
	t.Helper()
	k := emulator.RequireKine(t, emulator.KineOptions{CA: ca.File, Cert: server.CertFile, Key: server.KeyFile, Datastore: datastore})
	cli, err := etcdclient.New(t.Context(), etcdclient.Config{Endpoints: []string{k.KineServer.ClientURL},
		TLS: tlsfiles.Files{CA: ca.File, Cert: client.CertFile, Key: client.KeyFile}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return kineDatastore{srv: k, cli: cli,
		conn: []string{"--endpoints", k.KineServer.ClientURL, "--cacert", ca.File, "--cert", client.CertFile, "--key", client.KeyFile}}
}

// keyspace reads every key a datastore holds, by key.
func keyspace(ctx context.Context, t *testing.T, cli *clientv3.Client) (map[string]*mvccpb.KeyValue, int64) {
	t.Helper()
	// A bounded range: kine answers one to the end only at the current
	// revision, and SQL keys are text, below U+10FFFF (PostgreSQL takes no
	// bound that is not text).
	resp, err := cli.Get(ctx, "\x00", clientv3.WithRange("\U0010FFFF"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv
	}
	return out, resp.Header.Revision
}

// The k3s datastore, end to end: kube-apiserver over kine over SQLite
// (TLS between them, as k3s runs it) writes namespaces, config maps,
// secrets and events (leased); etcd-backup serve --source etcd-api backs
// kine up continuously, a logical full and deltas. Its chain is restored
// into an etcd data dir (k3s migrated from SQLite to etcd): etcd holds
// every key of kine's by value, create and mod revision and lease, at
// kine's revision, and a kube-apiserver started on it lists the same
// objects. And into a new, empty kine through its API: the same keys,
// values and leases.
func TestKineBackedUpAndRestoredBothWays(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ca := pki.NewCA(t, dir, "ca")
	server := ca.Issue(t, "kine", pki.LeafOptions{CommonName: "kine", ServerOnly: true})
	client := ca.Issue(t, "k3s", pki.LeafOptions{CommonName: "k3s", ClientOnly: true})
	src := startKine(t, ca, server, client)
	api := emulator.RequireKube(t, emulator.KubeOptions{Etcd: []string{src.srv.KineServer.ClientURL}, EtcdCA: ca.File,
		EtcdCert: client.CertFile, EtcdKey: client.KeyFile})
	kubectl := func(a *emulator.KubeAPI, stdin string, args ...string) string {
		t.Helper()
		out, err := a.Kubectl(ctx, []byte(stdin), args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	objects := func(n0, n int) string {
		var b strings.Builder
		for i := n0; i < n; i++ {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%03d, namespace: shop}\ndata: {price: \"%d\"}\n", i, i)
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s-%03d, namespace: shop}\nstringData: {key: \"k%d\"}\n", i, i)
		}
		// Events live on a lease of the API server's event TTL (an hour).
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Event\nmetadata: {name: ev-%03d, namespace: shop}\ninvolvedObject: {kind: ConfigMap, name: cm-%03d, namespace: shop}\nreason: Priced\nmessage: priced\ntype: Normal\n", n0, n0)
		return b.String()
	}
	kubectl(api.Kube, "", "create", "namespace", "shop")
	kubectl(api.Kube, objects(0, 40), "apply", "-f", "-")

	storeURL := "file://" + filepath.Join(dir, "store")
	p := startServe(t, src.conn, storeURL, "--source", "etcd-api", "--delta-period", "1s")
	waitLogicalFull(t, storeURL)
	// After the full: updates, deletes and creates reach the deltas.
	kubectl(api.Kube, objects(40, 60), "apply", "-f", "-")
	kubectl(api.Kube, "", "-n", "shop", "patch", "configmap", "cm-001", "-p", `{"data":{"price":"999"}}`)
	kubectl(api.Kube, "", "-n", "shop", "delete", "configmap/cm-002", "secret/s-003")
	want := kubectl(api.Kube, "", "-n", "shop", "get", "configmaps,secrets,events", "-o", "json")
	// The API server writes on its own (leases, endpoints): stopped, kine
	// holds still, and serve's last delta reaches its end at SIGTERM.
	api.Stop()
	if err := p.term(t); err != nil {
		t.Fatalf("serve at SIGTERM: %v\n%s", err, p.logs.String())
	}
	kineKeys, kineRev := keyspace(ctx, t, src.cli)
	l := listLogical(t, storeURL)
	if len(l.Chains) != 1 || len(l.Chains[0].Deltas) == 0 || l.Chains[0].LastRevision > kineRev || l.Chains[0].Problem != "" {
		t.Fatalf("the chain of kine at revision %d: %+v", kineRev, l)
	}
	t.Logf("kine at revision %d, %d keys; the chain: %s and %d deltas to %d; list says: %s", kineRev, len(kineKeys), l.Chains[0].Full.Key,
		len(l.Chains[0].Deltas), l.Chains[0].LastRevision, strings.Join(l.Chains[0].Logical.Limits, "; "))

	// k3s migrated to etcd.
	etcd := migrate(ctx, t, storeURL, dir, kineKeys, kineRev)
	ecli := etcd.Client(t)
	leases := map[int64]bool{}
	for _, kv := range kineKeys {
		if kv.Lease != 0 {
			leases[kv.Lease] = true
		}
	}
	for id := range leases {
		ttl, err := ecli.TimeToLive(ctx, clientv3.LeaseID(id))
		if err != nil || ttl.GrantedTTL != id {
			t.Fatalf("lease %d in etcd: %+v %v (kine's lease %d lives %d s)", id, ttl, err, id, id)
		}
	}
	if len(leases) == 0 {
		t.Fatal("no leased key: the events' lease was not backed up")
	}
	sec := etcd.Security
	api2 := emulator.RequireKube(t, emulator.KubeOptions{Etcd: etcd.Endpoints(), EtcdCA: sec.CA.File, EtcdCert: sec.Client.CertFile, EtcdKey: sec.Client.KeyFile})
	got := kubectl(api2.Kube, "", "-n", "shop", "get", "configmaps,secrets,events", "-o", "json")
	if w, g := objectsOf(t, want), objectsOf(t, got); !slices.Equal(w, g) || len(w) != 2*60-2+2 {
		t.Fatalf("kube-apiserver on the restored etcd lists %d objects:\n%s\nkine's listed %d:\n%s", len(g), strings.Join(g, "\n"), len(w), strings.Join(w, "\n"))
	}

	// A new kine, restored through its API.
	dst := startKine(t, ca, server, client)
	out := ok(t, nil, append([]string{"restore", "--store", storeURL, "--to-source", "etcd-api", "--apply", "--to", dst.srv.KineServer.ClientURL},
		dst.conn[2:]...)...)
	t.Logf("restore into a new kine:\n%s", out)
	dstKeys, _ := keyspace(ctx, t, dst.cli)
	sameKeys(t, "the new kine", kineKeys, dstKeys, false)
}

// sameKeys fails unless got holds want's keys with their values and
// leases (and, exact, their create and mod revisions), kine's own
// compaction record apart.
func sameKeys(t *testing.T, what string, want, got map[string]*mvccpb.KeyValue, exact bool) {
	t.Helper()
	for k, w := range want {
		g := got[k]
		if k == "compact_rev_key" && !exact {
			continue
		}
		switch {
		case g == nil:
			t.Fatalf("%s lacks %q", what, k)
		case !bytes.Equal(g.Value, w.Value) || g.Lease != w.Lease:
			t.Fatalf("%s holds %q as %q (lease %d), kine as %q (lease %d)", what, k, g.Value, g.Lease, w.Value, w.Lease)
		case exact && (g.CreateRevision != w.CreateRevision || g.ModRevision != w.ModRevision || g.Version != 1):
			t.Fatalf("%s holds %q created %d, modified %d, version %d; kine: %d, %d", what, k, g.CreateRevision, g.ModRevision, g.Version, w.CreateRevision, w.ModRevision)
		}
	}
	for k := range got {
		if want[k] == nil {
			t.Fatalf("%s holds %q, which kine does not", what, k)
		}
	}
}

// objectsOf reads a kubectl list: each object's kind, name and content.
func objectsOf(t *testing.T, list string) []string {
	t.Helper()
	var l struct {
		Items []struct {
			Kind     string
			Metadata struct{ Name, UID string }
			Data     map[string]string
			Message  string
		}
	}
	if err := json.Unmarshal([]byte(list), &l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range l.Items {
		out = append(out, fmt.Sprintf("%s/%s %s %v %s", it.Kind, it.Metadata.Name, it.Metadata.UID, it.Data, it.Message))
	}
	slices.Sort(out)
	return out
}

type listedLogical struct {
	Chains []struct {
		Full struct {
			Key          string
			LastRevision int64 `json:"last_revision"`
		}
		Deltas       []struct{ Key string }
		LastRevision int64 `json:"last_revision"`
		Problem      string
		Source       string
		Logical      *struct{ Limits []string }
	}
}

// waitLogicalFull waits for serve's first full, a logical one.
func waitLogicalFull(t *testing.T, storeURL string) {
	t.Helper()
	etcdtest.Eventually(t, "serve uploads a logical full of kine", time.Minute, func() bool {
		r := etcdBackup(t, nil, "list", "--store", storeURL, "-o", "json")
		var l listedLogical
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &l) == nil && len(l.Chains) == 1 && l.Chains[0].Logical != nil
	})
}

func listLogical(t *testing.T, storeURL string) listedLogical {
	t.Helper()
	var l listedLogical
	if err := json.Unmarshal([]byte(ok(t, nil, "list", "--store", storeURL, "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// kine over PostgreSQL: a create that loses a race rolls back and its
// sequence number stays taken, so kine's revisions skip numbers (it fills
// each gap with a row its watchers never see). The chain serve keeps
// replays across the skips, in its full and in its deltas, into an etcd
// data dir at kine's revision, every key as kine holds it.
func TestKineOverPostgresSkipsRevisions(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ca := pki.NewCA(t, dir, "ca")
	server := ca.Issue(t, "kine", pki.LeafOptions{CommonName: "kine", ServerOnly: true})
	client := ca.Issue(t, "k3s", pki.LeafOptions{CommonName: "k3s", ClientOnly: true})
	pg := emulator.RequirePostgres(t)
	src := startKineOn(t, ca, server, client, pg.Endpoint)
	_, began := keyspace(ctx, t, src.cli)
	var wrote atomic.Int64
	// Writers race to create the same keys: one wins each, the others'
	// inserts roll back.
	race := func(set string) {
		const writers, keys = 8, 100
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for i := range keys {
					key := fmt.Sprintf("/registry/%s/%03d", set, i)
					resp, err := src.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, key)).Commit()
					if err == nil && resp.Succeeded {
						wrote.Add(1)
					}
				}
			})
		}
		wg.Wait()
	}
	race("before")
	storeURL := "file://" + filepath.Join(dir, "store")
	p := startServe(t, src.conn, storeURL, "--source", "etcd-api", "--delta-period", "1s")
	waitLogicalFull(t, storeURL)
	l := listLogical(t, storeURL)
	fullRev, before := l.Chains[0].Full.LastRevision, wrote.Load()
	// A sequence number taken and never used, as a transaction that rolled
	// back leaves it: kine fills the gap with a row its watchers never see.
	psql := func(sql string) {
		t.Helper()
		out, err := exec.CommandContext(ctx, "psql", "-h", "127.0.0.1", "-p", fmt.Sprint(pg.Port), "-U", "postgres", "-d", "kine", "-c", sql).CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
	}
	skip := func() { psql("SELECT nextval(pg_get_serial_sequence('kine', 'id'))") }
	skip()
	race("after")
	// A restart continues the chain: kine's own keys, its fill rows and
	// its versions tell nothing against it.
	if err := p.term(t); err != nil {
		t.Fatalf("serve at SIGTERM: %v\n%s", err, p.logs.String())
	}
	p = startServe(t, src.conn, storeURL, "--source", "etcd-api", "--delta-period", "1s")
	// Placed and recorded: a SIGTERM from here on writes the last delta.
	etcdtest.Eventually(t, "serve places its backups again", time.Minute, func() bool {
		return strings.Contains(p.logs.String(), "recorded as the prefix's uploader")
	})
	skip()
	if _, err := src.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/registry/last"), "=", 0)).Then(clientv3.OpPut("/registry/last", "x")).Commit(); err != nil {
		t.Fatal(err)
	}
	wrote.Add(1)
	// Last, a row kine's watchers never see (kine's own fill of a gap):
	// kine's revision is past every event, and the last delta reaches it
	// by kine's progress notifications alone.
	psql("INSERT INTO kine(name, created, deleted, create_revision, prev_revision, lease) VALUES ('gap-last', 0, 1, 0, 0, 0)")
	if err := p.term(t); err != nil {
		t.Fatalf("serve at SIGTERM: %v\n%s", err, p.logs.String())
	}
	kineKeys, kineRev := keyspace(ctx, t, src.cli)
	if kineRev-fullRev <= wrote.Load()-before {
		t.Fatalf("kine went from the full's revision %d to %d with %d writes: no revision the deltas hold was skipped, the test tests nothing",
			fullRev, kineRev, wrote.Load()-before)
	}
	l = listLogical(t, storeURL)
	if len(l.Chains) != 1 || len(l.Chains[0].Deltas) < 2 || l.Chains[0].Problem != "" || l.Chains[0].LastRevision != kineRev {
		t.Fatalf("the chain after a restart of serve, kine at %d: %+v\n%s", kineRev, l, p.logs.String())
	}
	t.Logf("kine over Postgres went from revision %d to %d with %d writes; the chain: %s and %d deltas to %d", began, kineRev, wrote.Load(),
		l.Chains[0].Full.Key, len(l.Chains[0].Deltas), l.Chains[0].LastRevision)
	migrate(ctx, t, storeURL, dir, kineKeys, kineRev)
}

// migrate restores the chain on storeURL into an etcd data dir, as k3s
// moves from its datastore to etcd, starts etcd on it (TLS), and fails
// unless etcd holds kine's keys at kine's revision.
func migrate(ctx context.Context, t *testing.T, storeURL, dir string, kineKeys map[string]*mvccpb.KeyValue, kineRev int64) *etcdtest.Cluster {
	t.Helper()
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	dataDir := filepath.Join(dir, "etcd")
	ok(t, nil, "restore", "--store", storeURL, "--data-dir", dataDir, "--name", "r0", "--peer-urls", peer.String())
	etcd := etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true}, "r0", dataDir, peer)
	etcdKeys, etcdRev := keyspace(ctx, t, etcd.Client(t))
	if etcdRev != kineRev {
		t.Fatalf("etcd restored at revision %d, kine is at %d", etcdRev, kineRev)
	}
	sameKeys(t, "etcd", kineKeys, etcdKeys, true)
	return etcd
}

// serve stopped and started again on a small kine continues its chain:
// kine's compaction record, which a point Get does not answer as a range
// does, is among the few keys compared, and kine keeps no versions.
func TestKineServeRestartsOnItsChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ca := pki.NewCA(t, dir, "ca")
	src := startKine(t, ca, ca.Issue(t, "kine", pki.LeafOptions{CommonName: "kine", ServerOnly: true}),
		ca.Issue(t, "k3s", pki.LeafOptions{CommonName: "k3s", ClientOnly: true}))
	put := func(k, v string) int64 {
		t.Helper()
		resp, err := src.cli.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	put("/x/1", "a")
	storeURL := "file://" + filepath.Join(dir, "store")
	p := startServe(t, src.conn, storeURL, "--source", "etcd-api", "--delta-period", "1s")
	waitLogicalFull(t, storeURL)
	// Restarted on a chain of a full alone, then on one with a delta.
	for i := range 2 {
		if err := p.term(t); err != nil {
			t.Fatalf("serve at SIGTERM: %v\n%s", err, p.logs.String())
		}
		p = startServe(t, src.conn, storeURL, "--source", "etcd-api", "--delta-period", "1s")
		etcdtest.Eventually(t, "serve places its backups", time.Minute, func() bool { return strings.Contains(p.logs.String(), "backups placed") })
		if !strings.Contains(p.logs.String(), "continues=true") {
			t.Fatalf("serve did not continue its chain:\n%s", p.logs.String())
		}
		put("/x/2", fmt.Sprint(i))
		rev := put("/x/1", fmt.Sprint(i))
		// Stopped once the delta landed: a serve stopped while it starts
		// leaves the revisions to the next one.
		etcdtest.Eventually(t, "serve writes the delta", time.Minute, func() bool {
			l := listLogical(t, storeURL)
			return len(l.Chains) == 1 && l.Chains[0].LastRevision >= rev
		})
	}
	if err := p.term(t); err != nil {
		t.Fatalf("serve at SIGTERM: %v\n%s", err, p.logs.String())
	}
	kineKeys, kineRev := keyspace(ctx, t, src.cli)
	if l := listLogical(t, storeURL); len(l.Chains) != 1 || l.Chains[0].LastRevision != kineRev || l.Chains[0].Problem != "" {
		t.Fatalf("after two restarts of serve, kine at %d: %+v\n%s", kineRev, l, p.logs.String())
	}
	migrate(ctx, t, storeURL, dir, kineKeys, kineRev)
}
