package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/fleet"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// fleet as a seed's operator runs it over one bucket: a cluster whose
// sidecar drills (TLS and authentication on its member) and one backed up
// by hand; fleet lists both, fleet drill checks the first against the
// digest its sidecar recorded, and exits 3 once that digest no longer
// matches; fleet serve serves the metrics by prefix.
func TestFleetOfTwoClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, conn := secureMember(t)
	cli := c.Client(t)
	dir := t.TempDir()
	bucket := "file://" + dir
	serve := startServe(t, conn, bucket+"/seed/shoot--a/etcd-main", "--drill-period", "100ms")
	uploading(t, serve)
	if _, err := cli.Put(ctx, "/registry/k", "v"); err != nil {
		t.Fatal(err)
	}
	ok(t, nil, append([]string{"snapshot", "--store", bucket + "/seed/shoot--b/etcd-main"}, conn...)...)
	file, err := store.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := store.WithPrefix(file, "seed/shoot--a/etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the sidecar records a drill that compared", 30*time.Second, func() bool {
		_, _, _, verified, err := snapshot.Drills(ctx, a)
		return err == nil && verified
	})
	if err := serve.term(t); err != nil {
		t.Fatal(err)
	}

	var f fleet.Fleet
	if err := json.Unmarshal([]byte(ok(t, nil, "fleet", "--store", bucket, "-o", "json")), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Clusters) != 2 || f.Clusters[0].Prefix != "seed/shoot--a/etcd-main" || f.Clusters[0].Drill == nil || f.Clusters[1].Drill != nil {
		t.Fatalf("fleet: %+v", f.Clusters)
	}
	t.Logf("a user sees:\n%s", ok(t, nil, "fleet", "--store", bucket))

	drill := []string{"fleet", "drill", "--store", bucket, "--prefix", "seed/shoot--a/etcd-main"}
	report := ok(t, nil, drill...)
	t.Logf("a user sees:\n%s", report)
	if !strings.Contains(report, "against the digest its sidecar recorded") {
		t.Fatalf("fleet drill:\n%s", report)
	}
	// A sidecar's record the backups no longer match.
	_, verified, _, _, err := snapshot.Drills(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	verified.At, verified.SHA256 = time.Now(), strings.Repeat("0", 64)
	if _, err := snapshot.WriteDrill(ctx, a, verified); err != nil {
		t.Fatal(err)
	}
	if r := etcdBackup(t, nil, drill...); r.code != exitMismatch || !strings.Contains(r.stdout, "mismatch") {
		t.Fatalf("a drill against a digest the backups do not match: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// An Indexed Job's pod: the index from its environment.
	r := etcdBackup(t, []string{"JOB_COMPLETION_INDEX=1"}, "fleet", "drill", "--store", bucket, "--sample", "2", "-o", "json")
	if r.code != exitOK && r.code != exitMismatch {
		t.Fatalf("fleet drill --sample: exit %d %s", r.code, r.stderr)
	}
	if r := etcdBackup(t, []string{"JOB_COMPLETION_INDEX=5"}, "fleet", "drill", "--store", bucket, "--sample", "2"); r.code != exitOK {
		t.Fatalf("an index past the sample: exit %d %s", r.code, r.stderr)
	}
	if r := etcdBackup(t, nil, "fleet", "drill", "--store", bucket); r.code != exitUsage {
		t.Fatalf("fleet drill of nothing: exit %d %s", r.code, r.stderr)
	}

	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(binary, "fleet", "serve", "--store", bucket, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--interval", "1h")
	var logs lockedLog
	srv.Stderr = &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	var metrics string
	etcdtest.Eventually(t, "fleet serve serves a scan", 30*time.Second, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			return false
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return strings.Contains(metrics, "etcdkit_fleet_prefixes 2")
	})
	for _, want := range []string{`etcdkit_fleet_drill_result{prefix="seed/shoot--a/etcd-main",result="mismatch",source="fleet"} 1`,
		`etcdkit_fleet_stale{prefix="seed/shoot--b/etcd-main"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("no %s in\n%s", want, metrics)
		}
	}
}
