package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lastLine is the line the wrapper exits with.
func lastLine(out string) string { return tail(out, 1) }

// startedOnce leaves nd's data dir as a member that ran and stopped
// cleanly, over TLS.
func startedOnce(t *testing.T) (*node, []string) {
	t.Helper()
	nd := newNodes(t, 1, newSecure(t))[0]
	args := []string{"--config", nd.config, "--listen", nd.health}
	p := start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 30*time.Second)
	if err := p.term(t); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.output())
	}
	return nd, args
}

// Item: a damaged newest backup whose name is newer than the data dir
// does not keep a sound member down with a puzzle: the wrapper refuses,
// names the object and what to do, and leaves the data dir as it was.
func TestDamagedNewestBackupIsNamed(t *testing.T) {
	nd, args := startedOnce(t)
	stDir := filepath.Join(t.TempDir(), "store")
	junk := filepath.Join(stDir, "v2", "Full-00000000-00009999-1796000000")
	if err := os.MkdirAll(filepath.Dir(junk), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, []byte("junk!"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "wrapper", wrapperBin, nil, append(args, "--store", "file://"+stDir)...)
	code := p.wait(t, 60*time.Second)
	line := lastLine(p.output())
	for _, want := range []string{"refusing to start", "v2/Full-00000000-00009999-1796000000", "damaged", "move it out of the store", "the data dir is as it was",
		"restore an earlier state", "etcd-backup restore --revision"} {
		if code != 1 || !strings.Contains(line, want) {
			t.Fatalf("exit %d, the last line does not say %q:\n%s", code, want, line)
		}
	}
	t.Logf("a user sees: %s", line)
	if aside, _ := filepath.Glob(nd.dir + ".bak-*"); len(aside) != 0 {
		t.Fatalf("the data dir was moved: %v", aside)
	}
	// The way out works: without the object, the member starts on its data.
	if err := os.Remove(junk); err != nil {
		t.Fatal(err)
	}
	p = start(t, "wrapper", wrapperBin, nil, append(args, "--store", "file://"+stDir)...)
	nd.ready(t, 30*time.Second)
	p.kill(t)
}

// Items: a refusal says why on its line; the wrapper's command-line and
// configuration mistakes exit 2.
func TestWrapperRefusalsAndUsage(t *testing.T) {
	nd, args := startedOnce(t)
	b, err := os.ReadFile(nd.config)
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.NewReplacer("name: m0", "name: w2", "initial-cluster: m0=", "initial-cluster: w2=").Replace(string(b))
	other := filepath.Join(t.TempDir(), "w2.yaml")
	if err := os.WriteFile(other, []byte(renamed), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "wrapper", wrapperBin, nil, "--config", other, "--listen", nd.health)
	if code := p.wait(t, 30*time.Second); code != 1 {
		t.Fatalf("another member's data dir: exit %d\n%s", code, p.output())
	}
	line := lastLine(p.output())
	if !strings.Contains(line, `refusing to start: the data dir is WrongVolume: guard `) || !strings.Contains(line, `the data dir is member "m0"'s, not "w2"'s`) {
		t.Fatalf("the refusal does not say why on its line:\n%s", line)
	}
	t.Logf("a user sees: %s", line)

	noDataDir := filepath.Join(t.TempDir(), "no-data-dir.yaml")
	if err := os.WriteFile(noDataDir, []byte(strings.Replace(string(b), "data-dir: "+nd.dir+"\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(args, "--init", "bogus"), `--init "bogus": self, sidecar or etcdbr`},
		{append(args, "--init", "sidecar"), "--init sidecar needs --sidecar-url"},
		{append(args, "--init", "etcdbr"), "--init etcdbr needs --sidecar-url"},
		{append(args, "--store", "s4://bucket/x"), `unknown scheme "s4"`},
		{append(args, "--store", "s3://bucket/x?pathstyle=true"), "unknown option(s) pathstyle"},
		{[]string{"--config", noDataDir, "--listen", nd.health}, `"data-dir" is not set`},
		{append(args, "extra"), `unknown command "extra"`},
		{append(args, "--keep-moved-aside", "x"), `invalid argument "x"`},
		{append(args, "--peer-endpoints", "etcd-1:2379"), `--peer-endpoints "etcd-1:2379": not a URL`},
		{append(args, "--join-timeout", "-1s"), "--join-timeout -1s: more than 0"},
	} {
		p := start(t, "wrapper", wrapperBin, nil, tc.args...)
		if code := p.wait(t, 30*time.Second); code != 2 || !strings.Contains(p.output(), tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", tc.args[len(tc.args)-2:], code, tc.want, tail(p.output(), 3))
		}
	}
}

// Item: the wrapper says what it was built from.
func TestWrapperVersion(t *testing.T) {
	p := start(t, "wrapper", wrapperBin, nil, "version")
	if code := p.wait(t, 10*time.Second); code != 0 || !strings.Contains(p.output(), "etcd-wrapper ") || !strings.Contains(p.output(), "etcd v3.") {
		t.Fatalf("version: exit %d\n%s", code, p.output())
	}
}
