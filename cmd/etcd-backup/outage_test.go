package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// The store goes away for a few seconds under a write load and comes
// back: the sidecar reports the failures (never silent), resumes, and the
// chain has no gap and reaches the last write.
func TestStoreOutage(t *testing.T) {
	ctx := context.Background()
	srv := emulator.Require(t, emulator.S3)
	s3 := awss3.New(awss3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	if _, err := s3.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("outage")}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(work, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(work, "none"))
	storeURL := "s3://outage/etcd?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1"
	token := filepath.Join(work, "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(binary, "serve", "--store", storeURL, "--endpoints", c.Endpoints()[0], "--listen", api[len("http://"):],
		"--token-file", token, "--delta-period", "200ms", "--full-schedule", "@every 1h", "--gc-period", "-1s",
		"--follow-interval", "100ms", "--work-dir", t.TempDir())
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	load := etcdtest.StartLoad(t, cli)
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	waitForDeltas := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			cat, err := snapshot.List(ctx, st)
			if err == nil {
				if chain, err := cat.Latest(); err == nil && len(chain.Deltas) > 0 {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no delta after 30s\n%s", what, logs.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitForDeltas("before the outage")

	srv.Halt()
	time.Sleep(4 * time.Second)
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	load.Check(t)

	// The failures were counted, not swallowed.
	failures := metric(t, api+"/metrics", `etcdkit_snapshot_failures_total{kind="delta"}`)
	if failures == 0 {
		t.Fatalf("the outage left no failure in the metrics\n%s", logs.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, logs.String())
	}
	chain, rep := chaintest.Check(t, st, cli, chaintest.Options{Current: true})
	t.Logf("%v delta uploads failed during the outage; the chain has %d deltas, no gap, and ends at the last write (revision %d)",
		failures, len(chain.Deltas), rep.Digest.Revision)
}

// metric scrapes one series' value.
func metric(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /metrics", series)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
