package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/gobuild"
)

// binary is etcd-backup built once for the tests, which run it as a
// process the way operators and pods do.
var binary string

func TestMain(m *testing.M) {
	// Most of these tests wait: on processes of the binary, on etcd
	// members and their elections, on emulators. Three at a time keep two
	// cores busier than two do, and this package is the longest of the
	// test command's; -parallel given on the command line wins.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "3")
	}
	dir, err := os.MkdirTemp("", "etcd-backup-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "etcd-backup")
	if err := gobuild.Build(context.Background(), binary, "."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The tests share one emulator of each kind, each on a bucket of its
	// own.
	code := emulator.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// etcdBackup runs the binary to its end with extra environment entries.
func etcdBackup(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("etcd-backup %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// ok runs the binary and fails the test unless it exits 0.
func ok(t *testing.T, env []string, args ...string) string {
	t.Helper()
	r := etcdBackup(t, env, args...)
	if r.code != 0 {
		t.Fatalf("etcd-backup %s: exit %d\n%s\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}
