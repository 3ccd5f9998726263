package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// A second site (--secondary-store): each snapshot on the first store is
// copied there; while the second site is down the backups go on and
// /readyz says how far behind it is; back up, it catches up, and a
// restore from it is the live cluster's keyspace.
func TestSecondSite(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	srv := emulator.Require(t, emulator.S3)
	bucket := "second-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s3 := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	if _, err := s3.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	secondURL := "s3://" + bucket + "/etcd?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1"
	firstURL := "file://" + t.TempDir()

	c, conn := secureMember(t)
	cli := c.Client(t)
	p := startServe(t, conn, firstURL, "--secondary-store", secondURL, "--secondary-sync-period", "1h")
	first, err := store.Open(ctx, firstURL)
	if err != nil {
		t.Fatal(err)
	}
	second, err := store.Open(ctx, secondURL)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(st store.Store) []string {
		cat, err := snapshot.List(ctx, st)
		if err != nil {
			return nil
		}
		var out []string
		for _, s := range cat.All() {
			out = append(out, s.Key)
		}
		slices.Sort(out)
		return out
	}
	newest := func(st store.Store) int64 {
		cat, err := snapshot.List(ctx, st)
		if err != nil {
			return 0
		}
		ch, err := cat.Latest()
		if err != nil {
			return 0
		}
		return ch.LastRevision()
	}
	readyz := func() (int, api.Readiness) {
		resp, err := http.Get(p.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var r api.Readiness
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	caughtUp := func(rev int64) func() bool {
		return func() bool {
			return newest(second) >= rev && slices.Equal(keys(first), keys(second))
		}
	}

	rev := writes(t, cli, 40, "a")
	etcdtest.Eventually(t, "the second site holds the first store's snapshots", time.Minute, caughtUp(rev))

	srv.Halt()
	rev = writes(t, cli, 40, "b")
	etcdtest.Eventually(t, "the first store goes on while the second site is down", time.Minute, func() bool { return newest(first) >= rev })
	etcdtest.Eventually(t, "/readyz says the second site lags", time.Minute, func() bool {
		code, r := readyz()
		return code == http.StatusOK && r.Secondary != nil && r.Secondary.LastError != "" && r.Secondary.LagSeconds > 0
	})
	_, r := readyz()
	t.Logf("/readyz while the second site is down: %+v", *r.Secondary)

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	rev = writes(t, cli, 10, "c")
	etcdtest.Eventually(t, "the second site catches up", time.Minute, caughtUp(rev))
	etcdtest.Eventually(t, "/readyz says the second site holds them all", 30*time.Second, func() bool {
		_, r := readyz()
		return r.Secondary != nil && r.Secondary.LastError == "" && r.Secondary.LagSeconds == 0
	})

	var v map[string]any
	if err := json.Unmarshal([]byte(ok(t, nil, append([]string{"verify", "--store", secondURL, "--against", c.Endpoints()[0], "-o", "json"}, conn[2:]...)...)), &v); err != nil {
		t.Fatal(err)
	}
	if v["live"] != "equal" {
		t.Fatalf("the second site's newest state against the live cluster: %v", v)
	}
	// A first site that holds nothing (a lost bucket): restore reads the
	// second, and says so.
	res := etcdBackup(t, nil, "restore", "--store", "file://"+t.TempDir(), "--secondary-store", secondURL,
		"--data-dir", filepath.Join(t.TempDir(), "data"), "--name", "m", "--peer-urls", "http://127.0.0.1:2380")
	if res.code != 0 || !strings.Contains(res.stderr, "the second site answers") {
		t.Fatalf("restore with an empty first site: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	t.Logf("a user sees:\n%s", res.stderr)

	// A first site that does not answer at all (a refused connection):
	// the same.
	down := "s3://gone/p?endpoint=http://127.0.0.1:1&path-style=true&region=us-east-1"
	res = etcdBackup(t, nil, "get", "--store", down, "--secondary-store", secondURL, "/a")
	if res.code != 0 || !strings.Contains(res.stderr, "the second site answers") {
		t.Fatalf("get with the first site down: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}

// A second site that does not answer when serve starts keeps nothing
// from starting: the backups go to the first store, and /readyz says what
// the second site lacks.
func TestSecondSiteDownAtStart(t *testing.T) {
	_, conn := secureMember(t)
	first := "file://" + t.TempDir()
	p := startServe(t, conn, first, "--secondary-store", "s3://gone/p?endpoint=http://127.0.0.1:1&path-style=true&region=us-east-1")
	st, err := store.Open(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the first store holds a full snapshot", time.Minute, func() bool {
		cat, err := snapshot.List(t.Context(), st)
		return err == nil && len(cat.Fulls()) > 0
	})
	etcdtest.Eventually(t, "/readyz names the second site's error", time.Minute, func() bool {
		resp, err := http.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		var r api.Readiness
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode == http.StatusOK && r.Secondary != nil && r.Secondary.LastError != ""
	})
}
