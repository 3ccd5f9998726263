package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// get, diff and undelete as a user runs them, over TLS with
// authentication: a deleted prefix is read back, diffed and undeleted,
// and a key made again since is reported, not overwritten.
func TestGetDiffUndelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, conn := secureMember(t)
	cli := c.Client(t)
	storeURL := "file://" + t.TempDir()
	base := append([]string{"--store", storeURL}, conn...)
	ok(t, nil, append([]string{"snapshot"}, base...)...)
	for i := range 5 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/ns/a/k%d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Delete(ctx, "/registry/ns/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	past := strconv.FormatInt(resp.Header.Revision-1, 10)
	if _, err := cli.Put(ctx, "/registry/ns/a/k1", "again"); err != nil {
		t.Fatal(err)
	}
	ok(t, nil, append([]string{"snapshot", "--delta"}, base...)...)

	var got struct {
		Revision int64
		Kvs      []struct{ Key, Value string }
	}
	if err := json.Unmarshal([]byte(ok(t, nil, "get", "--store", storeURL, "--prefix", "/registry/ns/a/", "--revision", past, "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 5 || got.Kvs[2].Key != "/registry/ns/a/k2" || got.Kvs[2].Value != "v2" {
		t.Fatalf("get at %s: %+v", past, got)
	}
	table := ok(t, nil, "diff", "--store", storeURL, "--from", past, "--prefix", "/registry/ns/")
	if strings.Count(table, "\n-") != 4 || !strings.Contains(table, `~  /registry/ns/a/k1  "v1" → "again"`) {
		t.Fatalf("diff:\n%s", table)
	}
	t.Logf("a user sees:\n%s", table)

	undelete := append([]string{"undelete", "--prefix", "/registry/ns/a/", "--revision", past}, base...)
	var dry struct {
		Applied          bool
		Written, Changed []string
	}
	if err := json.Unmarshal([]byte(ok(t, nil, append(undelete, "-o", "json")...)), &dry); err != nil {
		t.Fatal(err)
	}
	if dry.Applied || len(dry.Written) != 4 || !slices.Equal(dry.Changed, []string{"/registry/ns/a/k1"}) {
		t.Fatalf("undelete, dry run: %+v", dry)
	}
	if r, err := cli.Get(ctx, "/registry/ns/a/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 1 {
		t.Fatalf("the dry run wrote: %v %v", r, err)
	}
	report := ok(t, nil, append(undelete, "--apply")...)
	t.Logf("a user sees:\n%s", report)
	live, err := cli.Get(ctx, "/registry/ns/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, kv := range live.Kvs {
		values = append(values, string(kv.Value))
	}
	if !slices.Equal(values, []string{"v0", "again", "v2", "v3", "v4"}) {
		t.Fatalf("after the undelete: %v", values)
	}
	if r := etcdBackup(t, nil, append([]string{"undelete", "--prefix", "/registry/"}, base...)...); r.code != exitUsage {
		t.Fatalf("undelete without a past: exit %d %s", r.code, r.stderr)
	}
}
