package scratch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// An orphan is what a process killed mid-work leaves: made in a child
// process that then exits without cleaning up.
func TestMain(m *testing.M) {
	if dir := os.Getenv("SCRATCH_ORPHAN_IN"); dir != "" {
		if _, _, err := Dir(dir, "work-"); err != nil {
			os.Exit(1)
		}
		if _, err := File(dir, "spool-*"); err != nil {
			os.Exit(1)
		}
		os.Exit(0) // dies holding both, as SIGKILL would leave them
	}
	os.Exit(m.Run())
}

// orphans is a new directory holding a dead child process's scratch
// directory and file.
func orphans(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SCRATCH_ORPHAN_IN="+parent)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("orphan maker: %v %s", err, out)
	}
	return parent
}

func TestSweepRemovesOrphansOnly(t *testing.T) {
	parent := orphans(t)
	live, release, err := Dir(parent, "work-")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	liveFile, err := File(parent, "spool-*")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = liveFile.Close() }()
	count := func(pattern string) int {
		m, _ := filepath.Glob(filepath.Join(parent, pattern))
		return len(m)
	}
	// Young entries are left alone, whoever holds them.
	Sweep(parent, "work-")
	Sweep(parent, "spool-")
	if count("work-*") != 2 || count("spool-*") != 2 {
		t.Fatalf("young entries were swept: %d dirs, %d files", count("work-*"), count("spool-*"))
	}
	old := time.Now().Add(-time.Minute)
	for _, p := range []string{"work-*", "spool-*"} {
		m, _ := filepath.Glob(filepath.Join(parent, p))
		for _, e := range m {
			_ = os.Chtimes(e, old, old)
		}
	}
	Sweep(parent, "work-")
	Sweep(parent, "spool-")
	if count("work-*") != 1 || count("spool-*") != 1 {
		t.Fatalf("after the sweep: %d dirs, %d files; want the live one of each", count("work-*"), count("spool-*"))
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the live dir was swept: %v", err)
	}
	if _, err := os.Stat(liveFile.Name()); err != nil {
		t.Fatalf("the live file was swept: %v", err)
	}
}

// A work dir such as /tmp holds other programs' directories under the same
// prefix (an emulator's, a user's copy): SweepMade removes only the
// orphans scratch made.
func TestSweepMadeLeavesOthersDirectories(t *testing.T) {
	parent := orphans(t)
	foreign := filepath.Join(parent, "work-of-someone-else")
	if err := os.MkdirAll(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	entries, _ := filepath.Glob(filepath.Join(parent, "*"))
	for _, e := range entries {
		_ = os.Chtimes(e, old, old)
	}
	SweepMade(parent, "work-")
	left, _ := filepath.Glob(filepath.Join(parent, "work-*"))
	if len(left) != 1 || left[0] != foreign {
		t.Fatalf("after the sweep: %v; want only %s", left, foreign)
	}
}
