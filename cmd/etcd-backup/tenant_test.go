package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

	for _, bad := range [][]string{
		{"restore", "--store", storeURL, "--to", c.Endpoints()[0]},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--to", c.Endpoints()[0], "--data-dir", t.TempDir()},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--data-dir", t.TempDir(), "--apply"},
		{"restore", "--store", storeURL, "--prefix", "/t/", "--rename", "/t/a/=/t/b/", "--data-dir", t.TempDir()},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--rename", "/t/a/", "--data-dir", t.TempDir()},
		{"restore", "--store", storeURL, "--prefix", "/t/a/", "--follow", "--data-dir", t.TempDir()},
	} {
		if r := etcdBackup(t, nil, bad...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d (usage): %s", bad, r.code, exitUsage, r.stderr)
		}
	}
}
