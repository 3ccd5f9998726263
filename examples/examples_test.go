package examples_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/gobuild"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate"
)

// example builds and runs one example and returns its output.
func example(t *testing.T, name string, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if err := gobuild.Build(t.Context(), bin, "./"+name); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	t.Logf("%s:\n%s", name, out)
	return string(out)
}

func TestQuickstart(t *testing.T) {
	start := time.Now()
	out := example(t, "quickstart")
	for _, want := range []string{"verdict Corrupt", "the wrapper restores", "all 1750 keys"} {
		if !strings.Contains(out, want) {
			t.Errorf("the quickstart does not say %q", want)
		}
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("the quickstart took %s, more than a newcomer's minute", took)
	}
}

func TestDivisions(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"wrapper-owns-init", "sidecar-owns-init"} {
		t.Run(name, func(t *testing.T) {
			if out := example(t, name); !strings.Contains(out, "all 500 keys are back") {
				t.Fatalf("%s did not bring the keys back", name)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	out := example(t, "tls")
	for _, want := range []string{"from etcd's configuration alone", "logged in as backup", "a full snapshot to revision",
		"give the CA bundle that signed it with --sidecar-cacert", "the backup equals the cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("the tls example does not say %q", want)
		}
	}
}

func TestAllInOne(t *testing.T) {
	dir := t.TempDir()
	example(t, "all-in-one", "-store", "file://"+dir, "-for", "3s")
	st, err := store.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := snapshot.List(context.Background(), st)
	if err != nil || len(cat.Fulls()) == 0 {
		t.Fatalf("all-in-one left no full snapshot: %v %v", cat, err)
	}
}

func TestLibrary(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	res, err := (etcdtest.Workload{Ops: 200, Seed: 4}).Run(context.Background(), c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	example(t, "library", "-endpoints", strings.Join(c.Endpoints(), ","), "-store", "file://"+t.TempDir(), "-data-dir", dir)
	rep, err := validate.DataDir(context.Background(), dir, validate.Options{Mode: validate.Full})
	if err != nil || rep.Verdict != validate.Valid || rep.Revision != res.LastRevision {
		t.Fatalf("restored data dir: %+v %v (want revision %d)", rep, err, res.LastRevision)
	}
}
