package soak

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/emulator"
)

// The soak in brief, as CI runs it: a fixed seed, every fault kind once,
// short holds. A violation fails the test with the report, which names
// the seed to replay.
func TestSoak(t *testing.T) {
	if os.Geteuid() != 0 {
		msg := "the soak mounts a small file system for each spool and needs root"
		if os.Getenv("ETCDKIT_REQUIRE_EMULATORS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; run it as root (CI does)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{Seed: 1, Dir: filepath.Join(dir, "soak"), Hold: 2 * time.Second, Gap: 500 * time.Millisecond, Restores: 4,
		Faults: len(Kinds()), Writers: 4, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	// The members start on etcd 3.6, run by the wrapper as its child, and
	// step to the embedded 3.7 when the rolling-step fault comes.
	o.StepFrom = emulator.RequireEtcdProgram(t, emulator.Etcd36)
	if err := Build(ctx, &o, dir); err != nil {
		t.Fatal(err)
	}
	srv := emulator.Require(t, emulator.S3)
	if err := UseS3(ctx, &o, srv, dir); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, o)
	var b strings.Builder
	rep.Write(&b)
	t.Log("\n" + b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Violations) > 0 {
		tailLogs(t, o.Dir)
		t.Fatalf("%d violations", len(rep.Violations))
	}
	if rep.Writes == 0 || rep.AcksChecked == 0 || rep.Restores < o.Restores || rep.KeysCompared == 0 || rep.ObjectsChecked == 0 {
		t.Fatalf("the soak checked too little: %+v", rep)
	}
}

// testWriter logs the harness's progress in the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func tailLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		out, _ := exec.Command("tail", "-n", "30", l).Output()
		t.Logf("--- %s ---\n%s", filepath.Base(l), out)
	}
}

// A violation's replay command carries every flag that chooses the faults
// and their order, not the seed alone.
func TestReplayCarriesWhatChoosesTheFaults(t *testing.T) {
	o := Options{Seed: 5, Writers: 16, Hold: 3 * time.Second, Gap: 500 * time.Millisecond, Duration: 72 * time.Minute}.withDefaults()
	if got, want := o.replay(), "go run ./bench/soak -seed 5 -writers 16 -hold 3s -gap 500ms -duration 1h12m0s"; got != want {
		t.Fatalf("replay %q, want %q", got, want)
	}
	o.Kinds = []string{"spool-full", "kill-leader"}
	if got := o.replay(); !strings.HasSuffix(got, " -kinds spool-full,kill-leader") {
		t.Fatalf("replay %q names no kinds", got)
	}
}
