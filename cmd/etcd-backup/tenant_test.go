package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
)

// A tenant's keys restored into its live cluster as a tenant admin runs
// it, over TLS as a user whose role holds that prefix alone: the dry run
// says what would change, --apply --replace makes the prefix what it
// was, and the flags that do not go together are refused.
func TestRestoreATenantsPrefix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, conn := secureMember(t)
	cli := c.Client(t)
	storeURL := "file://" + t.TempDir()
	base := append([]string{"--store", storeURL}, conn...)
	ok(t, nil, append([]string{"snapshot"}, base...)...)
	for i := range 4 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/t/a/k%d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Put(ctx, "/t/other", "x")
	if err != nil {
		t.Fatal(err)
	}
	past := strconv.FormatInt(resp.Header.Revision, 10)
	for _, op := range []clientv3.Op{clientv3.OpDelete("/t/a/k0"), clientv3.OpPut("/t/a/k1", "changed"), clientv3.OpPut("/t/a/k9", "new"), clientv3.OpPut("/t/other", "y")} {
		if _, err := cli.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, nil, append([]string{"snapshot", "--delta"}, base...)...)

	pw := filepath.Join(t.TempDir(), "tenant.password")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "tenant-a"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "tenant-a", "/t/a/", clientv3.GetPrefixRangeEnd("/t/a/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "tenant-a", "secret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "tenant-a", "tenant-a"); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	sec := c.Security
	tenant := []string{"restore", "--store", storeURL, "--prefix", "/t/a/", "--revision", past, "--to", c.Endpoints()[0],
		"--cacert", sec.CA.File, "--cert", sec.Client.CertFile, "--key", sec.Client.KeyFile, "--user", "tenant-a", "--password-file", pw}
	var dry struct {
		Applied                           bool
		Keys                              int
		Created, Overwritten, Same, Extra []string
		Deleted, Conflicts                []string
		LiveRevision                      int64 `json:"live_revision"`
	}
	if err := json.Unmarshal([]byte(ok(t, nil, append(tenant, "-o", "json")...)), &dry); err != nil {
		t.Fatal(err)
	}
	if dry.Applied || dry.Keys != 4 || !slices.Equal(dry.Created, []string{"/t/a/k0"}) || !slices.Equal(dry.Overwritten, []string{"/t/a/k1"}) ||
		len(dry.Same) != 2 || !slices.Equal(dry.Extra, []string{"/t/a/k9"}) || len(dry.Deleted) != 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	report := ok(t, nil, append(tenant, "--apply", "--replace")...)
	t.Logf("a user sees:\n%s", report)
	if !regexp.MustCompile(`(?m)^deleted +1 +/t/a/k9$`).MatchString(report) {
		t.Fatalf("the report of an applied restore:\n%s", report)
	}
	live, err := cli.Get(ctx, "/t/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var kvs []string
	for _, kv := range live.Kvs {
		kvs = append(kvs, string(kv.Key)+"="+string(kv.Value))
	}
	if want := []string{"/t/a/k0=v0", "/t/a/k1=v1", "/t/a/k2=v2", "/t/a/k3=v3", "/t/other=y"}; !slices.Equal(kvs, want) {
		t.Fatalf("after the restore: %v, want %v", kvs, want)
	}

	// A tenant admin's view of the backups: counts and sizes by
	// sub-prefix.
	table := ok(t, nil, "get", "--store", storeURL, "--prefix", "/t/", "--summary")
	t.Logf("a user sees:\n%s", table)
	for _, row := range []string{`(?m)^/t/ +1 +9 B$`, `(?m)^/t/a/ +4 +`} {
		if !regexp.MustCompile(row).MatchString(table) {
			t.Fatalf("get --summary has no row %s:\n%s", row, table)
		}
	}
	var diff struct {
		SubPrefixes []history.SubPrefix `json:"sub_prefixes"`
	}
	if err := json.Unmarshal([]byte(ok(t, nil, "diff", "--store", storeURL, "--prefix", "/t/", "--from", past, "-o", "json")), &diff); err != nil {
		t.Fatal(err)
	}
	if want := []history.SubPrefix{{Prefix: "/t/", Keys: 1, Bytes: 9, Changed: 1, BytesBefore: 9}, {Prefix: "/t/a/", Keys: 4, Bytes: 42, Created: 1, Deleted: 1, Changed: 1, BytesBefore: 36}}; !slices.Equal(diff.SubPrefixes, want) {
		t.Fatalf("diff's sub-prefixes: %+v, want %+v", diff.SubPrefixes, want)
	}
	t.Logf("a user sees:\n%s", ok(t, nil, "diff", "--store", storeURL, "--prefix", "/t/", "--from", past, "--summary"))

	for _, bad := range [][]string{
		{"get", "--store", storeURL, "--prefix", "/t/", "--summary", "--depth", "0"},
		{"restore", "--store", storeURL, "--to", c.Endpoints()[0]},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--to", c.Endpoints()[0], "--data-dir", t.TempDir()},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--data-dir", t.TempDir(), "--apply"},
		{"restore", "--store", storeURL, "--prefix", "/t/", "--rename", "/t/a/=/t/b/", "--data-dir", t.TempDir()},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--rename", "/t/a/", "--data-dir", t.TempDir()},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--follow", "--data-dir", t.TempDir()},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--rename", "/t/a/=/t/a/k", "--to", c.Endpoints()[0]},
		{"move", "--store", storeURL, "--prefix", "/t/a/", "--to", c.Endpoints()[0]},
	} {
		if r := etcdBackup(t, nil, bad...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d (usage): %s", bad, r.code, exitUsage, r.stderr)
		}
	}
}

// A tenant moved to another cluster as an operator runs it: serve backs
// up the source (TLS, authentication, its default delta period of 20 s),
// move loads the tenant from the backups and follows the deltas while
// the tenant writes; the writer stops, move gets SIGTERM, asks the
// sidecar for a delta and exits once it is applied, and the writer goes
// on against the target. The target holds what the source held; the
// writer's pause is the move's downtime.
func TestMoveATenantToAnotherCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, conn := secureMember(t)
	dst := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true, Security: src.Security})
	scli, dcli := src.Client(t), dst.Client(t)
	storeURL := "file://" + t.TempDir()
	serve := startServe(t, conn, storeURL, "--delta-period", "20s")
	uploading(t, serve)
	for i := range 10 {
		if _, err := scli.Put(ctx, fmt.Sprintf("/t/a/k%02d", i), "first"); err != nil {
			t.Fatal(err)
		}
	}
	// 409: the full holds them already.
	if r := apiCall(t, serve, "POST", "/v1/snapshots/delta", ""); r.code != 200 && r.code != 409 {
		t.Fatalf("a delta on demand: %d %s", r.code, r.body)
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"move", "--store", storeURL, "--prefix", "/t/a/", "--to", dst.Endpoints()[0], "--poll", "100ms",
		"--sidecar-url", serve.url, "--sidecar-token-file", token, "-o", "json"}, conn...)
	var stdout, stderr lockedLog
	move := exec.Command(binary, args...)
	move.Stdout, move.Stderr = &stdout, &stderr
	if err := move.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- move.Wait() }()
	t.Cleanup(func() {
		_ = move.Process.Kill()
		if t.Failed() {
			t.Logf("move's log:\n%s", stderr.String())
		}
	})
	etcdtest.Eventually(t, "move writes the first state", time.Minute, func() bool {
		return strings.Contains(stderr.String(), "first state written")
	})

	stopWriting, stopped, wrote := make(chan struct{}), make(chan time.Time, 1), make(chan struct{})
	go func() {
		var last time.Time
		defer func() { stopped <- last }()
		for i := 0; ; i++ {
			select {
			case <-stopWriting:
				return
			default:
			}
			if _, err := scli.Put(ctx, fmt.Sprintf("/t/a/k%02d", i%15), fmt.Sprint(i)); err != nil {
				t.Error(err)
				return
			}
			last = time.Now()
			if i == 20 {
				close(wrote)
			}
		}
	}()
	<-wrote
	if r := apiCall(t, serve, "POST", "/v1/snapshots/delta", ""); r.code != 200 {
		t.Fatalf("a delta on demand: %d %s", r.code, r.body)
	}
	etcdtest.Eventually(t, "move follows a delta", time.Minute, func() bool {
		return strings.Contains(stderr.String(), "move: following")
	})
	close(stopWriting)
	lastWrite := <-stopped
	if err := move.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("move: %v\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("move did not exit after SIGTERM")
	}
	if _, err := dcli.Put(ctx, "/t/a/switched", "yes"); err != nil {
		t.Fatal(err)
	}
	downtime := time.Since(lastWrite)
	var out struct {
		Revision        int64
		Deltas          int
		Events          int64
		LagClosed       int64   `json:"lag_closed"`
		CutOverSeconds  float64 `json:"cut_over_seconds"`
		CutOverRevision int64   `json:"cut_over_revision"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	t.Logf("move: %+v; the writer's downtime %v", out, downtime.Round(time.Millisecond))
	if out.LagClosed == 0 || out.Deltas < 2 || out.Revision < out.CutOverRevision {
		t.Fatalf("move's report: %+v", out)
	}
	srcKVs, err := scli.Get(ctx, "/t/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	dstKVs, err := dcli.Get(ctx, "/t/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, kv := range srcKVs.Kvs {
		want = append(want, string(kv.Key)+"="+string(kv.Value))
	}
	want = append(want, "/t/a/switched=yes")
	for _, kv := range dstKVs.Kvs {
		got = append(got, string(kv.Key)+"="+string(kv.Value))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the target holds %v\nthe source held %v", got, want)
	}
}
