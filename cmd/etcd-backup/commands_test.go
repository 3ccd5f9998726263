package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/validate"
)

// storeUnderTest is a store URL and the environment that reaches it;
// secure runs the members with TLS, client certificates and
// authentication.
type storeUnderTest struct {
	url    string
	env    []string
	secure bool
	// smoke: only the commands that move objects (snapshot, list, verify,
	// restore), for a backend whose contract the store conformance suite
	// checks in full.
	smoke bool
}

// forEachStore runs f against the file store, and as a smoke against the
// S3 emulator.
func forEachStore(t *testing.T, f func(*testing.T, storeUnderTest)) {
	t.Run("file", func(t *testing.T) { f(t, storeUnderTest{url: "file://" + t.TempDir()}) })
	t.Run("s3", func(t *testing.T) {
		srv := emulator.Shared(t, emulator.S3)
		cli := awss3.New(awss3.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		})
		bucket := emulator.Bucket(t)
		if _, err := cli.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatal(err)
		}
		f(t, storeUnderTest{
			smoke: true,
			url:   "s3://" + bucket + "/etcd?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1",
			env: []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
				"AWS_CONFIG_FILE=" + filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(t.TempDir(), "none")},
		})
	})
}

type listed struct {
	Chains []struct {
		ClusterID string `json:"cluster_id"`
		Full      struct {
			Key          string
			LastRevision int64 `json:"last_revision"`
		}
		Deltas       []struct{ Key string }
		LastRevision int64 `json:"last_revision"`
		Problem      string
	}
}

func list(t *testing.T, s storeUnderTest) listed {
	t.Helper()
	var l listed
	if err := json.Unmarshal([]byte(ok(t, s.env, "list", "--store", s.url, "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// Every operator command, end to end, against a real member on the file
// store, and there also against a member with TLS, client certificates and
// authentication, whose users, roles and permissions the restore keeps; on
// S3 the commands that move objects, as a smoke.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	forEachStore(t, operatorCommands)
	t.Run("file with TLS and auth", func(t *testing.T) {
		operatorCommands(t, storeUnderTest{url: "file://" + t.TempDir(), secure: true})
	})
}

func operatorCommands(t *testing.T, s storeUnderTest) {
	ctx := context.Background()
	opts := etcdtest.Options{UnsafeNoFsync: true, TLS: s.secure, Auth: s.secure}
	c := etcdtest.Start(t, opts)
	opts.Security = c.Security
	cli := c.Client(t)
	eps := strings.Join(c.Endpoints(), ",")
	conn := connFlags(c.Security, "backup")
	work := etcdtest.Workload{Ops: 300, Prefix: "/ops/", Seed: 7, TxnPercent: 10, DeletePercent: 10}
	if _, err := work.Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	base := append([]string{"--store", s.url, "--endpoints", eps, "--compression", "zstd"}, conn...)

	// A full snapshot, more writes, a delta: one chain.
	out := ok(t, s.env, append([]string{"snapshot"}, base...)...)
	if !strings.Contains(out, "Full-") {
		t.Fatalf("snapshot printed %q", out)
	}
	work.Seed, work.Prefix = 8, "/ops2/"
	if _, err := work.Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, s.env, append([]string{"snapshot", "--delta"}, base...)...); !strings.Contains(out, "Incr-") {
		t.Fatalf("snapshot --delta printed %q", out)
	}
	l := list(t, s)
	if len(l.Chains) != 1 || len(l.Chains[0].Deltas) != 1 || l.Chains[0].Problem != "" {
		t.Fatalf("list: %+v", l)
	}
	chainRev := l.Chains[0].LastRevision
	if table := ok(t, s.env, "list", "--store", s.url); !strings.Contains(table, "CHAIN") || !strings.Contains(table, "zstd") {
		t.Fatalf("list table:\n%s", table)
	}

	// verify: the chain, then against the live cluster, which has
	// moved on since: compared at the chain's revision.
	if _, err := cli.Put(ctx, "/after", "x"); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(ok(t, s.env, append([]string{"verify", "--store", s.url, "--against", eps, "-o", "json"}, conn...)...)), &v); err != nil {
		t.Fatal(err)
	}
	if v["live"] != "equal" || int64(v["revision"].(float64)) != chainRev || int64(v["live_revision"].(float64)) <= chainRev {
		t.Fatalf("verify: %v", v)
	}
	if !s.smoke {
		verifyAnother(ctx, t, s, opts, chainRev, conn)
	}

	// restore into a data dir, then serve it: the keyspace at the chain's revision.
	dir := filepath.Join(t.TempDir(), "restored")
	ok(t, s.env, "restore", "--store", s.url, "--data-dir", dir, "--name", "r0", "--peer-urls", "http://127.0.0.1:2390")
	rep, err := validate.DataDir(ctx, dir, validate.Options{Mode: validate.Full})
	if err != nil || rep.Verdict != validate.Valid || rep.Revision != chainRev {
		t.Fatalf("restored: %+v %v", rep, err)
	}
	if s.smoke {
		return
	}
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	if s.secure {
		peer.Scheme = "https"
	}
	want, _, err := etcdtest.ReadAll(ctx, cli, "/", chainRev)
	if err != nil {
		t.Fatal(err)
	}
	// --time before the chain existed finds no chain.
	if r := etcdBackup(t, s.env, "restore", "--store", s.url, "--data-dir", filepath.Join(t.TempDir(), "x"), "--time", "2000-01-01T00:00:00Z"); r.code != exitFailed {
		t.Fatalf("restore as of 2000: exit %d %s", r.code, r.stderr)
	}
	if r := etcdBackup(t, s.env, "restore", "--store", s.url, "--data-dir", "/x", "--time", "yesterday"); r.code != exitUsage {
		t.Fatalf("restore with a bad time: exit %d %s", r.code, r.stderr)
	}
	// --time past the backups' end restores the newest state they hold,
	// and says where they end; etcd's default member is named.
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if r := etcdBackup(t, s.env, "restore", "--store", s.url, "--data-dir", filepath.Join(t.TempDir(), "y"), "--time", future); r.code != 0 ||
		!strings.Contains(r.stdout, "backups end") || !strings.Contains(r.stderr, "etcd's default member") {
		t.Fatalf("restore as of an hour ahead: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := etcdBackup(t, s.env, "restore", "--store", s.url, "--data-dir", "/x", "--revision", "0"); r.code != exitUsage {
		t.Fatalf("restore --revision 0: exit %d %s", r.code, r.stderr)
	}

	// compact: a second chain starting where the first ends; gc keeps it.
	ok(t, s.env, append([]string{"compact", "--work-dir", t.TempDir()}, base...)...)
	if l := list(t, s); len(l.Chains) != 2 || l.Chains[1].Full.LastRevision != chainRev {
		t.Fatalf("after compact: %+v", l)
	}
	gc := []string{"gc", "--store", s.url, "--retention-policy", "limit-based", "--max-fulls", "1", "-o", "json"}
	var dry struct{ Snapshots []struct{ Key string } }
	if err := json.Unmarshal([]byte(ok(t, s.env, append(gc, "--dry-run")...)), &dry); err != nil || len(dry.Snapshots) != 2 {
		t.Fatalf("gc --dry-run: %+v %v", dry, err)
	}
	if l := list(t, s); len(l.Chains) != 2 {
		t.Fatalf("the dry run deleted: %+v", l)
	}
	ok(t, s.env, gc...)
	if l := list(t, s); len(l.Chains) != 1 || l.Chains[0].Full.LastRevision != chainRev {
		t.Fatalf("after gc: %+v", l)
	}

	// The compacted chain restores the same keyspace.
	dir2 := filepath.Join(t.TempDir(), "from-compacted")
	ok(t, s.env, "restore", "--store", s.url, "--data-dir", dir2, "--name", "r1", "--peer-urls", peer.String())
	r := etcdtest.StartDataDir(t, opts, "r1", dir2, peer)
	rcli := r.Client(t)
	got, _, err := etcdtest.ReadAll(ctx, rcli, "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("restored from the compacted chain: %d keys, the cluster had %d at %d", len(got), len(want), chainRev)
	}
	if s.secure {
		if before, after := authState(t, cli), authState(t, rcli); before != after {
			t.Fatalf("users and roles after the restore:\n%s\nbefore:\n%s", after, before)
		}
		reader := r.ClientConfig()
		reader.User, reader.PasswordFile = "reader", c.Security.PasswordFile("reader")
		rc, err := etcdclient.New(ctx, reader)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rc.Close() }()
		if _, err := rc.Get(ctx, "/ops/"); err != nil {
			t.Fatalf("the restored reader reads: %v", err)
		}
		if _, err := rc.Put(ctx, "/ops/x", "y"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("the restored reader writes: %v", err)
		}
	}

	// defrag, dry run and real.
	if out := ok(t, s.env, append([]string{"defrag", "--endpoints", eps, "--dry-run", "--defrag-pause", "0s"}, conn...)...); !strings.Contains(out, "would defragment") {
		t.Fatalf("defrag --dry-run:\n%s", out)
	}
	ok(t, s.env, append([]string{"defrag", "--endpoints", eps, "--defrag-pause", "0s"}, conn...)...)
}

// authState prints a cluster's users with their roles, and its roles
// with their permissions.
func authState(t *testing.T, cli *clientv3.Client) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	users, err := cli.UserList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users.Users {
		r, err := cli.UserGet(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "user %s: %v\n", u, r.Roles)
	}
	roles, err := cli.RoleList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range roles.Roles {
		r, err := cli.RoleGet(ctx, role)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "role %s: %v\n", role, r.Perm)
	}
	return b.String()
}

// Flags come from the command line, the environment and a YAML file, in
// that order; a wrong key or value is a usage error.
func TestConfiguration(t *testing.T) {
	st := "file://" + t.TempDir()
	if out := ok(t, []string{"ETCDKIT_STORE=" + st}, "list"); !strings.Contains(out, "CHAIN") {
		t.Fatalf("list with the store from the environment:\n%s", out)
	}
	cfg := filepath.Join(t.TempDir(), "etcd-backup.yaml")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(cfg, []byte("store: "+st+"\noutput: json\n"), 0o600))
	if out := ok(t, nil, "list", "--config", cfg); !strings.Contains(out, `"chains"`) {
		t.Fatalf("list with the config file:\n%s", out)
	}
	// The command line wins over the file.
	if out := ok(t, nil, "list", "--config", cfg, "-o", "table"); !strings.Contains(out, "CHAIN") {
		t.Fatalf("list -o table over the file:\n%s", out)
	}
	must(os.WriteFile(cfg, []byte("store: "+st+"\nstorage: x\n"), 0o600))
	if r := etcdBackup(t, nil, "list", "--config", cfg); r.code != exitUsage || !strings.Contains(r.stderr, `"storage"`) {
		t.Fatalf("unknown config key: exit %d %s", r.code, r.stderr)
	}
	if r := etcdBackup(t, []string{"ETCDKIT_COMPRESSION=lz4"}, "snapshot", "--store", st); r.code != exitUsage {
		t.Fatalf("bad compression from the environment: exit %d %s", r.code, r.stderr)
	}
	if r := etcdBackup(t, nil, "list"); r.code != exitUsage || !strings.Contains(r.stderr, "--store") {
		t.Fatalf("no store: exit %d %s", r.code, r.stderr)
	}
}

// verifyAnother: verify against another cluster at a later revision exits 3.
func verifyAnother(ctx context.Context, t *testing.T, s storeUnderTest, opts etcdtest.Options, chainRev int64, conn []string) {
	t.Helper()
	other := etcdtest.Start(t, opts)
	ocli := other.Client(t)
	for i := int64(0); i < chainRev+5; i++ {
		if _, err := ocli.Put(ctx, fmt.Sprintf("/other/%d", i), "y"); err != nil {
			t.Fatal(err)
		}
	}
	if r := etcdBackup(t, s.env, append([]string{"verify", "--store", s.url, "--against", strings.Join(other.Endpoints(), ",")}, conn...)...); r.code != exitMismatch {
		t.Fatalf("verify against another cluster: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
