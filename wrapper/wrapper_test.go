package wrapper_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/wrapper"
)

// With no store, --on-corrupt=wipe lets a corrupt member of a running
// cluster move its data dir aside and rejoin from its peers; removed from
// the cluster later, its etcd stops and Run says so.
func TestWipeOnCorruptThenRemoved(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	if _, err := (etcdtest.Workload{Ops: 100, Seed: 9}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	m := c.Members[2]
	if m == c.Leader() {
		m = c.Members[1]
	}
	cfg := m.Config()
	m.Stop()
	if err := os.Truncate(filepath.Join(m.Dir, "member", "snap", "db"), 10000); err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, o := range c.Members {
		if o != m {
			others = append(others, o.ClientURL.String())
		}
	}
	health := "127.0.0.1:" + freePort(t)
	opts := wrapper.Options{Config: cfg, Endpoints: others, Listen: health}

	// Without the wipe: refused.
	var refused *startup.Refusal
	if err := wrapper.Run(ctx, opts); !errors.As(err, &refused) || !slices.Contains(refused.Plan.Remedies, startup.AllowWipe) {
		t.Fatalf("corrupt, no store, no wipe: %v, want a refusal that names the wipe as a remedy", err)
	}
	opts.WipeOnCorrupt = true
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan wrapper.Etcd, 1)
	opts.OnReady = func(e wrapper.Etcd) { ready <- e }
	done := make(chan error, 1)
	go func() { done <- wrapper.Run(rctx, opts) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(60 * time.Second):
		t.Fatal("not ready")
	}
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		waitOK(t, "http://"+health+p)
	}
	var id uint64
	deadline := time.Now().Add(60 * time.Second)
	for id == 0 {
		st, err := member.Inspect(ctx, cli, member.InspectOptions{})
		if err == nil {
			for _, s := range st {
				if s.Name == cfg.Name && !s.Learner && s.Healthy() {
					id = s.ID
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not promoted: %+v %v", cfg.Name, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if aside, _ := filepath.Glob(m.Dir + ".bak-*"); len(aside) != 1 {
		t.Fatalf("the corrupt data dir was not moved aside: %v", aside)
	}

	// Removed from the cluster, the member's etcd stops by itself.
	if err := member.Remove(ctx, cli, id, member.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil when etcd stopped by itself")
		}
		t.Log(err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run still runs after its member was removed")
	}
}

func waitOK(t *testing.T, url string) {
	t.Helper()
	etcdtest.Eventually(t, url+" answers 200", 30*time.Second, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func freePort(t *testing.T) string {
	t.Helper()
	p, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}
