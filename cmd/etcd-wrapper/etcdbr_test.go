package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/restore"
)

// The wrapper with --init=etcdbr beside a sidecar that speaks
// etcd-backup-restore's protocol (etcd-backup server, with TLS to etcd and
// on its own port): the sidecar initializes the lone member's data dir at
// every start, bootstrapping it first, restoring it from its backups after
// its database is corrupted, and checking it quickly after a clean stop;
// the wrapper validates what the sidecar left and starts etcd.
func TestInitEtcdBR(t *testing.T) {
	t.Parallel()
	sec := newSecure(t)
	nd := newNodes(t, 1, sec)[0]
	work := t.TempDir()
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	env := []string{"HOME=" + work, "ETCD_CONF=" + nd.config, "POD_NAME=" + nd.name, "ETCDKIT_LISTEN=" + listen}
	sc := start(t, "sidecar", backupBin, env, "server", fmt.Sprintf("--server-port=%d", port), "--storage-provider=Local",
		"--store-container=backups", "--store-prefix=e2e", "--delta-snapshot-period=1s", "--garbage-collection-period=0s",
		"--cacert="+sec.ca.File, "--cert="+sec.backup.CertFile, "--key="+sec.backup.KeyFile, "--insecure-transport=false",
		"--insecure-skip-tls-verify=false", "--endpoints="+nd.client, "--server-cert="+sec.api.CertFile, "--server-key="+sec.api.KeyFile,
		"--data-dir="+nd.dir, "--snapstore-temp-directory="+filepath.Join(work, "tmp"))
	args := []string{"--config", nd.config, "--listen", nd.health, "--init", "etcdbr", "--sidecar-url", "https://" + listen,
		"--sidecar-cacert", sec.ca.File}
	p := start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 60*time.Second)
	if out := p.output(); !logged(out, "startup: decided", "action=bootstrap") || !logged(sc.output(), "etcdbr: initialized", "action=bootstrap") {
		t.Fatalf("the first start did not bootstrap:\n%s", out)
	}
	cli := client(t, nd.client, sec)
	for i := range 100 {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("/etcdbr/%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	want, err := cli.Get(context.Background(), "/etcdbr/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	storeURL := "file://" + filepath.Join(work, "backups", "e2e")
	etcdtest.Eventually(t, "the backups reach the last write", 30*time.Second, func() bool {
		return lastBackedUp(t, storeURL) >= want.Header.Revision
	})

	p.kill(t)
	corrupt(t, nd.dir)
	p = start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 60*time.Second)
	if out := sc.output(); !logged(out, "etcdbr: initialized", "action=restore") || !strings.Contains(out, "startup: restored") {
		t.Fatalf("the sidecar did not restore:\n%s", tail(out, 20))
	}
	if out := p.output(); !logged(out, "startup: decided", "action=restart") {
		t.Fatalf("the wrapper did not start the restored data dir:\n%s", out)
	}
	got, err := client(t, nd.client, sec).Get(context.Background(), "/etcdbr/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	// The revision is bumped past the backups', never back.
	if err != nil || got.Count != want.Count || got.Header.Revision < want.Header.Revision+restore.MinSafeBump {
		t.Fatalf("after the sidecar's restore: %d keys at %d (%v), want %d past %d by a bump of at least %d",
			got.Count, got.Header.Revision, err, want.Count, want.Header.Revision, restore.MinSafeBump)
	}

	// After a clean stop the sidecar is asked for the quick check.
	if err := p.term(t); err != nil {
		t.Fatal(err)
	}
	p = start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 60*time.Second)
	if out := sc.output(); !logged(out, "etcdbr: initializing the data dir", "sanity=true") {
		t.Fatalf("the sidecar was not asked for the sanity check:\n%s", tail(out, 20))
	}
	if err := p.term(t); err != nil {
		t.Fatal(err)
	}
	if err := sc.term(t); err != nil {
		t.Fatal(err)
	}
}
