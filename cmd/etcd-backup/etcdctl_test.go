package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdkit/etcdkit/etcdtest"
)

// What etcdctl and etcdutl users type by habit works: etcdctl's
// environment (after etcd-backup's own), -w json, etcdutl's restore
// flags, completion and man pages.
func TestEtcdctlHabits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true}
	c := etcdtest.Start(t, opts)
	opts.Security = c.Security
	sec := c.Security
	store := "file://" + t.TempDir()
	cli := c.Client(t)
	put := func(k string) {
		if _, err := cli.Put(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	put("/a")
	// A shell set up for etcdctl: an endpoint without a scheme (https,
	// as the CA says), the certificates, and a user with a password after
	// the colon, which is not read: the password comes from the file.
	hostPort := strings.TrimPrefix(c.Endpoints()[0], "https://")
	etcdctl := []string{"ETCDCTL_ENDPOINTS=" + hostPort, "ETCDCTL_CACERT=" + sec.CA.File, "ETCDCTL_CERT=" + sec.Client.CertFile,
		"ETCDCTL_KEY=" + sec.Client.KeyFile, "ETCDCTL_USER=backup:not-read", "ETCDCTL_API=3", "ETCDKIT_PASSWORD_FILE=" + sec.PasswordFile("backup")}
	var taken []struct {
		Key          string `json:"key"`
		LastRevision int64  `json:"last_revision"`
	}
	r := etcdBackup(t, etcdctl, "snapshot", "--store", store, "-w", "json")
	if err := json.Unmarshal([]byte(r.stdout), &taken); r.code != 0 || err != nil || len(taken) != 1 {
		t.Fatalf("snapshot from etcdctl's environment, -w json: exit %d %+v %v\n%s", r.code, taken, err, r.stderr)
	}
	if !strings.Contains(r.stderr, "ETCDCTL_USER holds a password, which is not read") {
		t.Errorf("no word that ETCDCTL_USER's password is not read:\n%s", r.stderr)
	}
	// A format given wrong is refused before the command acts.
	if r := etcdBackup(t, etcdctl, "snapshot", "--store", store, "-w", "simple"); r.code != exitUsage || !strings.Contains(r.stderr, "table or json") {
		t.Errorf("snapshot -w simple: exit %d %s", r.code, r.stderr)
	}
	if l := list(t, storeUnderTest{url: store}); len(l.Chains) != 1 || len(l.Chains[0].Deltas) != 0 {
		t.Fatalf("snapshot -w simple took a snapshot: %+v", l)
	}
	// A malformed etcdctl variable is not read, and fails nothing that
	// does not need it.
	if r := etcdBackup(t, []string{"ETCDCTL_DIAL_TIMEOUT=5"}, "list", "--store", store); r.code != 0 || !strings.Contains(r.stderr, "ETCDCTL_DIAL_TIMEOUT=") || !strings.Contains(r.stderr, "is not read") {
		t.Errorf("list with ETCDCTL_DIAL_TIMEOUT=5: exit %d %s", r.code, r.stderr)
	}
	// move's source is never etcdctl's: the shell's etcdctl may point at
	// the target.
	if r := etcdBackup(t, etcdctl, "move", "--store", store, "--prefix", "/a", "--to", c.Endpoints()[0]); r.code != exitUsage || !strings.Contains(r.stderr, "the source cluster") {
		t.Errorf("move with the source from ETCDCTL_ENDPOINTS: exit %d %s", r.code, r.stderr)
	}
	// A flag and its other name are one: given twice, refused; the
	// command line's wins over the environment's other name.
	if r := etcdBackup(t, nil, "list", "--store", store, "-o", "table", "-w", "json"); r.code != exitUsage || !strings.Contains(r.stderr, "--output and --write-out are one flag") {
		t.Errorf("-o table -w json: exit %d %s", r.code, r.stderr)
	}
	if out := ok(t, []string{"ETCDKIT_WRITE_OUT=json"}, "version", "-o", "table"); strings.HasPrefix(out, "{") {
		t.Errorf("version -o table with ETCDKIT_WRITE_OUT=json printed %s", out)
	}
	// etcd-backup's own variable wins over etcdctl's, the command line
	// over both.
	put("/b")
	wrong := append(etcdctl[1:], "ETCDCTL_ENDPOINTS=127.0.0.1:1", "ETCDKIT_ENDPOINTS="+c.Endpoints()[0])
	ok(t, wrong, "snapshot", "--store", store, "--delta")
	if r := etcdBackup(t, etcdctl, "snapshot", "--store", store, "--endpoints", "https://127.0.0.1:1", "--dial-timeout", "1s"); r.code != exitFailed {
		t.Fatalf("--endpoints over ETCDCTL_ENDPOINTS: exit %d %s", r.code, r.stderr)
	}

	// etcdutl snapshot restore's names, and the one refused.
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	dir := filepath.Join(t.TempDir(), "m1")
	var restored struct {
		Revision     int64 `json:"revision"`
		RevisionBump int64 `json:"revision_bump"`
	}
	out := ok(t, nil, "restore", "--store", store, "--data-dir", dir, "--name", "m1", "--initial-cluster", "m1="+peer.String(),
		"--initial-cluster-token", "habit", "--initial-advertise-peer-urls", peer.String(), "--bump-revision", "1000", "--mark-compacted", "-w", "json")
	if err := json.Unmarshal([]byte(out), &restored); err != nil || restored.RevisionBump != 1000 {
		t.Fatalf("restore with etcdutl's flags: %s %v", out, err)
	}
	m := etcdtest.StartDataDir(t, opts, "m1", dir, peer)
	resp, err := m.Client(t).Get(ctx, "/")
	if err != nil || resp.Header.Revision != restored.Revision+1000 {
		t.Fatalf("the restored member's revision: %v %v, want %d", resp.Header.Revision, err, restored.Revision+1000)
	}
	for _, refused := range [][]string{{"--skip-hash-check"}, {"--mark-compacted"}, {"--bump-revision", "0", "--mark-compacted"},
		{"--bump-revision", "5", "--mark-compacted=false"}, {"--initial-advertise-peer-urls", peer.String(), "--peer-urls=" + peer.String()}} {
		r := etcdBackup(t, nil, append([]string{"restore", "--store", store, "--data-dir", filepath.Join(t.TempDir(), "x")}, refused...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, strings.SplitN(refused[len(refused)-1], "=", 2)[0]) {
			t.Errorf("restore %v: exit %d %s", refused, r.code, r.stderr)
		}
	}
	if r := etcdBackup(t, nil, "list", "--store", store, "-w", "fields"); r.code != exitUsage || !strings.Contains(r.stderr, "table or json") {
		t.Errorf("-w fields: exit %d %s", r.code, r.stderr)
	}

	// Completion, as etcdctl's: the script, and the formats -w takes.
	if out := ok(t, nil, "completion", "bash"); !strings.Contains(out, "__start_etcd-backup") {
		t.Errorf("completion bash: %.200s", out)
	}
	if out := ok(t, nil, "__complete", "list", "-w", ""); !strings.HasPrefix(out, "table\njson\n") {
		t.Errorf("completion of -w: %q", out)
	}
	// Man pages, one per command.
	man := t.TempDir()
	ok(t, nil, "man", man)
	b, err := os.ReadFile(filepath.Join(man, "etcd-backup-restore.1"))
	if err != nil || !strings.Contains(string(b), `\fB--bump-revision\fP`) || !strings.Contains(string(b), ".SH SYNOPSIS") {
		t.Errorf("etcd-backup-restore.1: %v\n%.300s", err, b)
	}
}
