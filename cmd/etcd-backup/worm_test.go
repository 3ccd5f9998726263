package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/emulator/s3lock"
)

// The operator commands on an S3 bucket with Object Lock and a day's
// compliance retention, against a member with TLS: snapshots, a
// compaction, retention (every expired snapshot locked, no failure), the
// write-once check, an extension and a restore all succeed; a file store
// says it locks nothing.
func TestWriteOnceBucket(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	url, env := lockedBucketURL(t)

	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true})
	cli := c.Client(t)
	base := append([]string{"--store", url, "--endpoints", strings.Join(c.Endpoints(), ",")}, connFlags(c.Security, "backup")...)
	var firstFull int64
	for i := range 2 {
		res, err := (etcdtest.Workload{Ops: 100, Prefix: "/worm/", Seed: 90 + uint64(i)}).Run(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstFull = res.LastRevision
		}
		snap := []string{"snapshot"}
		if i == 1 {
			// The second full is locked for two days, past the bucket's one.
			snap = append(snap, "--lock-for", "48h", "--lock-mode", "compliance")
		}
		ok(t, env, append(snap, base...)...)
		if _, err := (etcdtest.Workload{Ops: 50, Prefix: "/worm2/", Seed: 95 + uint64(i)}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		ok(t, env, append([]string{"snapshot", "--delta"}, base...)...)
	}
	ok(t, env, append([]string{"compact", "--work-dir", t.TempDir()}, base...)...)

	var gc struct {
		Snapshots []struct{ Key string }
		Locked    []struct {
			Key         string
			LockedUntil time.Time `json:"locked_until"`
		}
		Kept []struct{ Key string } `json:"kept_for_lock"`
	}
	if err := json.Unmarshal([]byte(ok(t, env, "gc", "--store", url, "--retention-policy", "limit-based", "--max-fulls", "1", "-o", "json")), &gc); err != nil {
		t.Fatal(err)
	}
	if len(gc.Snapshots) != 0 || len(gc.Locked) != 2 || len(gc.Kept) == 0 || time.Until(gc.Locked[0].LockedUntil) < 23*time.Hour {
		t.Fatalf("gc on a locked bucket: deleted %v, locked %v, kept with a locked full %v", gc.Snapshots, gc.Locked, gc.Kept)
	}
	// Each snapshot is shown locked for the bucket's day, the second full
	// for its two.
	out := ok(t, env, "list", "--check", "--store", url)
	day, twoDays := 0, 0
	for _, m := range regexp.MustCompile(`  (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)  v2/`).FindAllStringSubmatch(out, -1) {
		until, err := time.Parse(time.RFC3339, m[1])
		switch left := time.Until(until); {
		case err != nil:
			t.Fatal(err)
		case left > 23*time.Hour && left < 25*time.Hour:
			day++
		case left > 47*time.Hour && left < 49*time.Hour:
			twoDays++
		}
	}
	if !strings.Contains(out, "write-once: yes: the store refused to delete etcdkit/lock-probe/") || day < 4 || twoDays != 1 {
		t.Fatalf("list --check on a locked bucket (%d locked a day, %d two):\n%s", day, twoDays, out)
	}
	// A bucket with Object Lock and no default: the backups lock what
	// they write, and list --check probes as they do only when told.
	srv, lockOnly := lockedBucket(t, 0)
	lockOnlyURL := "s3://" + lockOnly + "/etcd?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1"
	ok(t, env, append([]string{"snapshot", "--lock-for", "1h"}, append(base[2:], "--store", lockOnlyURL)...)...)
	if out := ok(t, env, "list", "--check", "--store", lockOnlyURL); !strings.Contains(out, "write-once: partly:") || !strings.Contains(out, "1 of 1 snapshots carry a lock of their own") {
		t.Fatalf("list --check, without the backups' --lock-for, on a bucket without a default lock:\n%s", out)
	}
	if out := ok(t, env, "list", "--check", "--store", lockOnlyURL, "--lock-for", "1h"); !strings.Contains(out, "write-once: yes") {
		t.Fatalf("list --check --lock-for 1h on a bucket without a default lock:\n%s", out)
	}
	// Anyone with the bucket's credentials can take every snapshot out of
	// the backups (a delete marker over a first version tagged
	// x-etcd-snapshot-exclude): list and restore say so, not "nothing
	// was ever backed up".
	s3c := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	vs, err := s3c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String(lockOnly), Prefix: aws.String("etcd/v2/")})
	if err != nil || len(vs.Versions) == 0 {
		t.Fatalf("versions: %v", err)
	}
	for _, v := range vs.Versions {
		if _, err := s3c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: aws.String(lockOnly), Key: v.Key, VersionId: v.VersionId,
			Tagging: &s3types.Tagging{TagSet: []s3types.Tag{{Key: aws.String("x-etcd-snapshot-exclude"), Value: aws.String("true")}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s3c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(lockOnly), Key: v.Key}); err != nil {
			t.Fatal(err)
		}
	}
	if r := etcdBackup(t, env, "list", "--store", lockOnlyURL); r.code != 0 || !strings.Contains(r.stderr, "all 1, such as v2/Full-") || !strings.Contains(r.stderr, "taken out of the backups with x-etcd-snapshot-exclude") {
		t.Fatalf("list of a store whose every snapshot is excluded: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := etcdBackup(t, env, "restore", "--store", lockOnlyURL, "--data-dir", filepath.Join(t.TempDir(), "hidden")); r.code != exitFailed ||
		!strings.Contains(r.stderr, "every snapshot the store holds (1, such as v2/Full-") {
		t.Fatalf("restore from a store whose every snapshot is excluded: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out := ok(t, nil, "list", "--check", "--store", "file://"+t.TempDir()); !strings.Contains(out, "write-once: no") {
		t.Fatalf("list --check on a file store:\n%s", out)
	}
	if out := ok(t, env, "extend-immutability", "--store", url); !strings.Contains(out, "on the store's server") {
		t.Fatalf("extend-immutability:\n%s", out)
	}
	// The newest chain restores, and so does the first, locked and kept.
	ok(t, env, "restore", "--store", url, "--data-dir", filepath.Join(t.TempDir(), "latest"))
	rev := strconv.FormatInt(firstFull, 10)
	if out := ok(t, env, "restore", "--store", url, "--data-dir", filepath.Join(t.TempDir(), "first"), "--revision", rev); !saysRevision(out, firstFull) {
		t.Fatalf("restore of the first chain:\n%s", out)
	}
}

// serve says in /readyz whether the store refuses deletes: yes on the
// locked bucket; on a file store no, and not ready with
// --require-write-once.
func TestServeSaysWriteOnce(t *testing.T) {
	t.Parallel()
	url, env := lockedBucketURL(t)
	_, conn := secureMember(t)
	readyz := func(p *sidecarProc, want func(int, map[string]any) bool) map[string]any {
		t.Helper()
		var body map[string]any
		etcdtest.Eventually(t, "serve has asked the store", 30*time.Second, func() bool {
			resp, err := http.Get(p.url + "/readyz")
			if err != nil {
				return false
			}
			defer func() { _ = resp.Body.Close() }()
			body = map[string]any{}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			return body["write_once"] != nil && want(resp.StatusCode, body)
		})
		return body
	}
	locked := serveProc(t, "", conn, url, "--write-once-check-period", "1s", "--require-write-once")
	locked.env = env
	locked.start(t)
	body := readyz(locked, func(code int, b map[string]any) bool { return code == http.StatusOK })
	if w := body["write_once"].(map[string]any); w["deletes_refused"] != true {
		t.Fatalf("/readyz on a locked bucket: %v", body)
	}
	open := startServe(t, conn, "file://"+t.TempDir(), "--write-once-check-period", "1s", "--require-write-once")
	body = readyz(open, func(code int, _ map[string]any) bool { return code == http.StatusServiceUnavailable })
	if w := body["write_once"].(map[string]any); w["deletes_refused"] != false || !strings.Contains(fmt.Sprint(body["error"]), "write-once is required") {
		t.Fatalf("/readyz on a file store: %v", body)
	}
}

// lockedBucketURL is the URL of a new S3 bucket with Object Lock and a
// day's compliance retention, and the environment with its keys.
func lockedBucketURL(t *testing.T) (string, []string) {
	t.Helper()
	srv, bucket := lockedBucket(t, 1)
	url := "s3://" + bucket + "/etcd?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1"
	env := []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"AWS_CONFIG_FILE=" + filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(t.TempDir(), "none")}
	return url, env
}

// lockedBucket makes a new S3 bucket with Object Lock and a default
// compliance retention of days (0: none).
func lockedBucket(t *testing.T, days int32) (*emulator.Server, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := emulator.Shared(t, emulator.S3)
	bucket := emulator.Bucket(t)
	if err := s3lock.CreateBucket(ctx, srv, bucket, days); err != nil {
		t.Fatal(err)
	}
	return srv, bucket
}
