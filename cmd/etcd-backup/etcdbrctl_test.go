package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
)

// sameKeyspace fails unless got holds want's keys, values and leases.
func sameKeyspace(t *testing.T, ctx context.Context, want, got *clientv3.Client, what string) {
	t.Helper()
	w, _ := keyspace(ctx, t, want)
	g, _ := keyspace(ctx, t, got)
	sameKeys(t, what, w, g, false)
}

// etcdbrctl's snapshot, restore and initialize, with the arguments their
// users pass, TLS and authentication on: a Deployment of "etcdbrctl
// snapshot" backs a cluster up from outside it (etcd-backup-restore#1063,
// kubeadm's etcd), "etcdbrctl restore" builds a data dir from its backups,
// and the init container of a self-hosted shoot's bootstrap etcd
// (gardener#14993: initialize --storage-provider=Local --store-container
// --store-prefix --data-dir --restoration-temp-snapshots-dir, POD_NAME,
// POD_NAMESPACE and an etcd.conf.yaml) restores a missing or damaged data
// dir, leaves a sound one, and refuses, non-zero and with the reason, a
// damaged one it has no backups for. restore --if-needed is the same
// one-shot with etcd-backup's own flags.
func TestEtcdBRCtlCommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true})
	sec := c.Security
	cli := c.Client(t)
	putMany(t, cli, 100, "before")
	home, work := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home}
	storeFlags := []string{"--storage-provider=Local", "--store-container=backups", "--store-prefix=etcd-main"}
	password, err := os.ReadFile(sec.PasswordFile("backup"))
	if err != nil {
		t.Fatal(err)
	}
	p := &sidecarProc{name: "snapshot", env: env, args: append([]string{"snapshot"}, append(storeFlags,
		"--endpoints="+c.Endpoints()[0], "--insecure-transport=false", "--insecure-skip-tls-verify=false",
		"--cacert="+sec.CA.File, "--cert="+sec.Client.CertFile, "--key="+sec.Client.KeyFile,
		"--etcd-username=backup", "--etcd-password="+strings.TrimSpace(string(password)),
		"--schedule=0 */1 * * *", "--delta-snapshot-period=1s", "--garbage-collection-policy=LimitBased", "--max-backups=3",
		"--garbage-collection-period=1m", "--defragmentation-schedule=0 0 */3 * *", "--compress-snapshots=true",
		"--compression-policy=gzip", "--snapstore-temp-directory="+filepath.Join(work, "snapstore"))...)}
	p.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("snapshot's log:\n%s", p.logs.String())
		}
	})
	storeURL := "file://" + filepath.Join(home, "backups", "etcd-main")
	etcdtest.Eventually(t, "snapshot writes its first full", 30*time.Second, func() bool {
		r := etcdBackup(t, nil, "list", "--store", storeURL)
		return r.code == 0 && strings.Contains(r.stdout, "Full")
	})
	last := writes(t, cli, 200, "during")
	if _, err := cli.Delete(ctx, "/fault/before/00001"); err != nil {
		t.Fatal(err)
	}
	last++
	etcdtest.Eventually(t, "snapshot's deltas reach the cluster's end", 30*time.Second, func() bool { return listTimelines(t, storeURL).newest() >= last })
	if err := p.term(t); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.logs.String(), ".gz") {
		t.Fatalf("snapshot wrote no gzip objects:\n%s", p.logs.String())
	}

	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	member := []string{"--name=r0", "--initial-cluster=r0=" + peer.String(), "--initial-advertise-peer-urls=" + peer.String(), "--initial-cluster-token=etcd-cluster"}
	started := etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true, Security: sec}

	t.Run("restore", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "default.etcd")
		out := ok(t, env, append(append([]string{"restore"}, storeFlags...), append(member, "--data-dir="+dir)...)...)
		if !saysRevision(out, last) {
			t.Fatalf("restore with etcdbrctl's flags:\n%s", out)
		}
		r := etcdtest.StartDataDir(t, started, "r0", dir, peer)
		sameKeyspace(t, ctx, cli, r.Client(t), "etcdbrctl restore's data dir")
		r.Close()
	})

	// The bootstrap etcd's configuration, for one member named otherwise
	// than its pod: the member the backups were taken of, m0.
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "new.etcd")
	conf := filepath.Join(dir, "etcd.conf.yaml")
	_, client, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	client.Scheme = "https"
	if err := os.WriteFile(conf, fmt.Appendf(nil, "name: m0\ndata-dir: %s\ninitial-cluster: m0=%s\ninitial-cluster-token: etcd-cluster\ninitial-cluster-state: new\n"+
		"initial-advertise-peer-urls: %s\nadvertise-client-urls: %s\n", dataDir, peer.String(), peer.String(), client.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	initEnv := append([]string{"POD_NAME=etcd-bootstrap-node-1", "POD_NAMESPACE=kube-system", "ETCD_CONF=" + conf}, env...)
	initialize := func(extra ...string) result {
		t.Helper()
		return etcdBackup(t, initEnv, append([]string{"initialize", "--data-dir=" + dataDir,
			"--restoration-temp-snapshots-dir=" + filepath.Join(dir, "restoration.tmp"), "--snapstore-temp-directory=" + filepath.Join(dir, "tmp")}, extra...)...)
	}
	want := func(r result, code int, says string) {
		t.Helper()
		if r.code != code || !strings.Contains(r.stdout+r.stderr, says) {
			t.Fatalf("initialize: exit %d (want %d), without %q:\n%s\n%s", r.code, code, says, r.stdout, r.stderr)
		}
		t.Logf("initialize says: %s", strings.TrimSpace(cutLogs(r.stdout+r.stderr)))
	}
	want(initialize(storeFlags...), 0, "action\trestore")
	want(initialize(storeFlags...), 0, "action\trestart")
	want(initialize(append(storeFlags, "--validation-mode=sanity")...), 0, "action\trestart")
	r := etcdtest.StartDataDir(t, started, "m0", dataDir, peer)
	sameKeyspace(t, ctx, cli, r.Client(t), "initialize's data dir")
	r.Close()
	// A damaged database: restored, the damaged data dir moved aside;
	// without a store to restore from, refused and left as it is.
	damage := func() {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dataDir, "member", "snap", "db"), []byte("not a database"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	damage()
	want(initialize(), 1, "give it a store")
	if b, err := os.ReadFile(filepath.Join(dataDir, "member", "snap", "db")); err != nil || string(b) != "not a database" {
		t.Fatalf("a refused initialize changed the data dir: %q, %v", b, err)
	}
	want(initialize(storeFlags...), 0, "action\trestore")
	if aside, _ := filepath.Glob(dataDir + ".bak-*"); len(aside) == 0 {
		t.Fatal("the damaged data dir was not moved aside")
	}
	want(initialize("--validation-mode=quick"), 2, "full or sanity")

	t.Run("restore --if-needed", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "m.etcd")
		args := []string{"restore", "--if-needed", "--store", storeURL, "--data-dir", dir, "--name", "m0", "--peer-urls", peer.String(), "--initial-cluster-token", "etcd-cluster"}
		if out := ok(t, nil, args...); !strings.Contains(out, "restored\t") {
			t.Fatalf("restore --if-needed into a missing data dir:\n%s", out)
		}
		if out := ok(t, nil, args...); !strings.Contains(out, "nothing restored\t") || !strings.Contains(out, "(restart)") {
			t.Fatalf("restore --if-needed into a sound data dir:\n%s", out)
		}
		if r := etcdBackup(t, nil, "restore", "--if-needed", "--store", "file://"+t.TempDir(), "--data-dir", filepath.Join(t.TempDir(), "n.etcd")); r.code != 0 ||
			!strings.Contains(r.stdout, "nothing restored\t") || !strings.Contains(r.stderr, "the store holds no backups") {
			t.Fatalf("restore --if-needed from a store without backups: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// cutLogs leaves out of a command's output its log records.
func cutLogs(s string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if !strings.HasPrefix(l, "time=") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
