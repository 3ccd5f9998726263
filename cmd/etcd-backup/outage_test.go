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
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// The store goes away for a few seconds under a write load and comes
// back: the sidecar reports the failures (never silent), resumes, and the
// chain has no gap and reaches the last write.
func TestStoreOutage(t *testing.T) {
	o := startOutage(t)
	o.waitForChain(t, "a delta before the outage", func(c snapshot.Chain) bool { return len(c.Deltas) > 0 })
	o.srv.Halt()
	time.Sleep(4 * time.Second)
	o.restart(t)
	time.Sleep(3 * time.Second)
	o.load.Check(t)
	failures := o.failures(t)
	o.stop(t)
	chain, rep := chaintest.Check(t, o.st, o.cli, chaintest.Options{Current: true})
	t.Logf("%v delta uploads failed during the outage; the chain has %d deltas, no gap, and ends at the last write (revision %d)",
		failures, len(chain.Deltas), rep.Digest.Revision)
}

// The store stays away until the events held in memory reach their limit
// and etcd compacts the revisions left to its history: those revisions are
// gone, the sidecar says so, and a full snapshot starts a chain that
// reaches the last write.
func TestStoreOutagePastHistory(t *testing.T) {
	ctx := context.Background()
	o := startOutage(t, "--delta-memory-limit", "16384")
	o.waitForChain(t, "a delta before the outage", func(c snapshot.Chain) bool { return len(c.Deltas) > 0 })
	o.srv.Halt()
	time.Sleep(4 * time.Second)
	resp, err := o.cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	compacted := resp.Header.Revision
	if _, err := o.cli.Compact(ctx, compacted); err != nil {
		t.Fatal(err)
	}
	o.restart(t)

	o.waitForChain(t, fmt.Sprintf("a full snapshot past the compaction at %d", compacted), func(c snapshot.Chain) bool {
		return c.Full.LastRevision >= compacted
	})
	o.load.Check(t)
	failures := o.failures(t)
	o.stop(t)
	// The first revision lost is named, and the chain before it keeps
	// every revision that was held in memory.
	m := regexp.MustCompile(`watch from revision (\d+) \(compacted at \d+\)`).FindStringSubmatch(o.logs.String())
	if m == nil {
		t.Fatalf("the lost revisions were not reported\n%s", o.logs.String())
	}
	lost, _ := strconv.ParseInt(m[1], 10, 64)
	cat, err := snapshot.List(ctx, o.st)
	if err != nil {
		t.Fatal(err)
	}
	chains := cat.Chains()
	if len(chains) != 2 || chains[0].LastRevision() != lost-1 {
		t.Fatalf("chains %v: want the first to end at %d, before the lost revisions\n%s", chains, lost-1, o.logs.String())
	}
	chain, rep := chaintest.Check(t, o.st, o.cli, chaintest.Options{Current: true})
	t.Logf("%v delta uploads failed; revisions from %d were reported lost (compacted at %d) after the chain that ends at %d; a full snapshot at %d started a chain of %d deltas ending at the last write (revision %d)",
		failures, lost, compacted, chains[0].LastRevision(), chain.Full.LastRevision, len(chain.Deltas), rep.Digest.Revision)
}

// outage is a serve process on the S3 emulator beside a member under a
// write load.
type outage struct {
	srv    *emulator.Server
	st     store.Store
	cli    *clientv3.Client
	load   *etcdtest.Load
	api    string
	cmd    *exec.Cmd
	exited chan error
	logs   *strings.Builder
}

func startOutage(t *testing.T, args ...string) *outage {
	t.Helper()
	ctx := context.Background()
	srv := emulator.Require(t, emulator.S3)
	s3 := awss3.New(awss3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	bucket := "outage-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := s3.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(work, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(work, "none"))
	storeURL := "s3://" + bucket + "/etcd?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1"
	token := filepath.Join(work, "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{srv: srv, cli: c.Client(t), api: fmt.Sprintf("http://127.0.0.1:%d", port), exited: make(chan error, 1), logs: &strings.Builder{}}
	o.cmd = exec.Command(binary, append([]string{"serve", "--store", storeURL, "--endpoints", c.Endpoints()[0], "--listen", o.api[len("http://"):],
		"--token-file", token, "--delta-period", "200ms", "--full-schedule", "@every 1h", "--gc-period", "0s",
		"--follow-interval", "100ms", "--work-dir", t.TempDir()}, args...)...)
	o.cmd.Stderr = o.logs
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", o.logs.String())
		}
	})
	go func() { o.exited <- o.cmd.Wait() }()
	t.Cleanup(func() { _ = o.cmd.Process.Kill() })
	o.load = etcdtest.StartLoad(t, o.cli)
	if o.st, err = store.Open(ctx, storeURL); err != nil {
		t.Fatal(err)
	}
	return o
}

// waitForChain waits until the store's latest chain is as ok wants it.
func (o *outage) waitForChain(t *testing.T, what string, ok func(snapshot.Chain) bool) {
	t.Helper()
	etcdtest.Eventually(t, what, 30*time.Second, func() bool {
		cat, err := snapshot.List(context.Background(), o.st)
		if err != nil {
			return false
		}
		chain, err := cat.Latest()
		return err == nil && ok(chain)
	})
}

func (o *outage) restart(t *testing.T) {
	t.Helper()
	if err := o.srv.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// failures are the delta uploads the sidecar counted as failed: an outage
// must leave some.
func (o *outage) failures(t *testing.T) float64 {
	t.Helper()
	n := metric(t, o.api+"/metrics", `etcdkit_snapshot_failures_total{kind="delta"}`)
	if n == 0 {
		t.Fatalf("the outage left no failure in the metrics\n%s", o.logs.String())
	}
	return n
}

// stop ends serve with SIGTERM, which must exit 0.
func (o *outage) stop(t *testing.T) {
	t.Helper()
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-o.exited; err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, o.logs.String())
	}
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
