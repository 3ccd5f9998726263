package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// connFlags are the flags that reach a cluster with sec's certificates
// and, with authentication, as user.
func connFlags(sec *etcdtest.Security, user string) []string {
	if sec == nil {
		return nil
	}
	var f []string
	if sec.CA != nil {
		f = append(f, "--cacert", sec.CA.File, "--cert", sec.Client.CertFile, "--key", sec.Client.KeyFile)
	}
	if sec.Auth {
		f = append(f, "--user", user, "--password-file", sec.PasswordFile(user))
	}
	return f
}

// Each wrong connection setting fails at start, with the file, flag or
// user to fix, instead of a command that waits.
func TestConnectionSettingsFailAtStart(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true, UnsafeNoFsync: true})
	sec := c.Security
	ep := c.Endpoints()[0]
	dir := t.TempDir()
	stranger := pki.NewCA(t, dir, "stranger")
	expired := sec.CA.Issue(t, "expired", pki.LeafOptions{CommonName: "old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	wrong := filepath.Join(dir, "wrong-password")
	if err := os.WriteFile(wrong, []byte("not it\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	store := "file://" + t.TempDir()
	// with replaces the value of each flag given in pairs.
	with := func(pairs ...string) []string {
		args := append([]string{"--store", store, "--endpoints", ep}, connFlags(sec, "backup")...)
		for i := 0; i < len(pairs); i += 2 {
			found := false
			for j := range args {
				if args[j] == pairs[i] {
					args[j+1], found = pairs[i+1], true
				}
			}
			if !found {
				args = append(args, pairs[i], pairs[i+1])
			}
		}
		return args
	}
	// The connection flags come from the environment and --config like
	// every other flag.
	cfg := filepath.Join(dir, "etcd-backup.yaml")
	if err := os.WriteFile(cfg, []byte("user: backup\npassword-file: "+sec.PasswordFile("backup")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, []string{"ETCDKIT_CACERT=" + sec.CA.File, "ETCDKIT_CERT=" + sec.Client.CertFile, "ETCDKIT_KEY=" + sec.Client.KeyFile},
		"snapshot", "--store", store, "--endpoints", ep, "--config", cfg)
	for _, tc := range []struct {
		name string
		cmd  string
		args []string
		code int
		want []string
	}{
		{"the wrong CA", "snapshot", with("--cacert", stranger.File), exitFailed, []string{"not signed by a CA of --cacert " + stranger.File}},
		{"the wrong CA, serve", "serve", with("--cacert", stranger.File, "--token-file", wrong), exitFailed, []string{"not signed by a CA of --cacert " + stranger.File}},
		{"an expired certificate", "snapshot", with("--cert", expired.CertFile, "--key", expired.KeyFile), exitFailed, []string{"--cert " + expired.CertFile, "expired on", "renew it"}},
		{"a key that is not the certificate's", "snapshot", with("--key", sec.Member.KeyFile), exitFailed, []string{"--key " + sec.Member.KeyFile + " is not the key of --cert " + sec.Client.CertFile}},
		{"no client certificate", "defrag", with("--cert", "", "--key", ""), exitFailed, []string{"requires a client certificate: give one with --cert and --key"}},
		{"the wrong password", "snapshot", with("--password-file", wrong), exitFailed, []string{`etcd user "backup" did not log in`, "the password in " + wrong + " is wrong"}},
		{"the wrong password, serve", "serve", with("--password-file", wrong, "--token-file", wrong), exitFailed, []string{`etcd user "backup" did not log in`}},
		{"a user without the root role", "snapshot", with("--user", "reader", "--password-file", sec.PasswordFile("reader")), exitFailed, []string{`etcd user "reader"`, `not "root"`, "etcdctl user grant-role reader root"}},
		{"a password on the command line", "snapshot", with("--user", "backup:secret"), exitUsage, []string{"--user", "--password-file"}},
		{"http:// to a member serving TLS", "verify", []string{"--store", store, "--against", strings.Replace(ep, "https://", "http://", 1)}, exitFailed, []string{"serves TLS at this address: use an https:// URL"}},
		{"no member", "snapshot", with("--endpoints", fmt.Sprintf("https://127.0.0.1:%d", port)), exitFailed, []string{"no etcd member answers", "connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{tc.cmd}, tc.args...)
			if tc.cmd == "verify" {
				// verify needs a chain before it asks the cluster.
				ok(t, nil, append([]string{"snapshot"}, with()...)...)
			}
			r := etcdBackup(t, nil, args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("the error does not say %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The sidecar's client certificate is replaced on disk while it uploads
// under a write load, and etcd then stops accepting the old one: the
// sidecar reconnects with the new certificate, its deltas continue, and
// the chain equals the cluster at the end, without a restart.
func TestServeRotatesItsCertificate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true, UnsafeNoFsync: true})
	sec, m := c.Security, c.Members[0]
	dir := t.TempDir()
	// The sidecar's certificate is first of one CA, then of another;
	// etcd trusts the first and its own clients' CA, then the second and
	// its own clients'.
	before, after := pki.NewCA(t, dir, "before"), pki.NewCA(t, dir, "after")
	sec.ClientCA = filepath.Join(dir, "client-cas.pem")
	must(t, pki.Bundle(sec.ClientCA, sec.CA, before))
	m.Stop()
	m.Restart(t)
	cert, key := filepath.Join(dir, "backup.pem"), filepath.Join(dir, "backup-key.pem")
	old := before.Issue(t, "backup-old", pki.LeafOptions{CommonName: "etcd-backup", ClientOnly: true})
	must(t, old.Install(cert, key))
	cli := c.Client(t)

	storeURL := "file://" + filepath.Join(dir, "store")
	p := startServe(t, []string{"--endpoints", c.Endpoints()[0], "--cacert", sec.CA.File, "--cert", cert, "--key", key,
		"--user", "backup", "--password-file", sec.PasswordFile("backup")}, storeURL)
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	backedUp := func(rev int64) func() bool {
		return func() bool {
			cat, err := snapshot.List(ctx, st)
			if err != nil {
				return false
			}
			chain, err := cat.Latest()
			return err == nil && chain.LastRevision() >= rev
		}
	}
	load := etcdtest.StartLoad(t, cli)
	time.Sleep(time.Second)
	resp, err := cli.Put(ctx, "/before-rotation", "x")
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "deltas with the old certificate", 30*time.Second, backedUp(resp.Header.Revision))

	must(t, after.Issue(t, "backup-new", pki.LeafOptions{CommonName: "etcd-backup", ClientOnly: true}).Install(cert, key))
	must(t, pki.Bundle(sec.ClientCA, sec.CA, after))
	m.Stop()
	m.Restart(t)
	// The old certificate is refused now: only the new one can upload.
	refused := c.ClientConfig()
	refused.TLS.Cert, refused.TLS.Key = old.CertFile, old.KeyFile
	refused.TLS.Names = tlsfiles.Names{Cert: "--cert"}
	if _, err := etcdclient.New(ctx, refused); err == nil || !strings.Contains(err.Error(), "does not trust the client certificate") {
		t.Fatalf("the old certificate after the rotation: %v", err)
	}
	// The uploader's run that etcd's restart stopped winds down first
	// (its last delta, once etcd is back); then a new one starts.
	etcdtest.Eventually(t, "serve uploads again", 30*time.Second, func() bool {
		_, up := p.ready()
		return up
	})
	resp, err = cli.Put(ctx, "/after-rotation", "x")
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "deltas with the new certificate", 30*time.Second, backedUp(resp.Header.Revision))
	load.Ran(t)

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-p.exited; err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, p.logs.String())
	}
	chain, rep := chaintest.Check(t, st, cli, chaintest.Options{Current: true})
	t.Logf("one process throughout; the chain: full at %d, %d deltas to %d, equal to the cluster", chain.Full.LastRevision, len(chain.Deltas), rep.Digest.Revision)
	if !strings.Contains(p.logs.String(), "reloaded changed files") {
		t.Errorf("serve's log does not say it read the new certificate:\n%s", p.logs.String())
	}
}
