package etcdclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

var flags = tlsfiles.Names{CA: "--cacert", Cert: "--cert", Key: "--key", ServerName: "--server-name"}

func dial(t *testing.T, cfg etcdclient.Config) (*clientv3.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg.TLS.Names = flags
	cli, err := etcdclient.New(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { _ = cli.Close() })
	}
	return cli, err
}

// wantErr fails unless err says every one of want.
func wantErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
}

// Against a member with TLS, client certificates and authentication,
// the right settings work, and each wrong one fails at once with what to
// fix.
func TestTLSAndAuthentication(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true, UnsafeNoFsync: true})
	sec := c.Security
	eps := c.Endpoints()
	good := etcdclient.Config{Endpoints: eps, TLS: sec.TLSFiles(), User: "backup", PasswordFile: sec.PasswordFile("backup"), RequireRoot: true}
	cli, err := dial(t, good)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(context.Background(), "/k", "v"); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	stranger := pki.NewCA(t, dir, "stranger")
	foreign := stranger.Issue(t, "foreign", pki.LeafOptions{CommonName: "foreign"})
	expired := sec.CA.Issue(t, "expired", pki.LeafOptions{CommonName: "old", NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	wrongPassword := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongPassword, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := strings.Replace(eps[0], "https://", "http://", 1)
	for _, tc := range []struct {
		name string
		edit func(*etcdclient.Config)
		want []string
	}{
		{"the wrong CA", func(c *etcdclient.Config) { c.TLS.CA = stranger.File }, []string{"not signed by a CA of --cacert " + stranger.File}},
		{"no CA", func(c *etcdclient.Config) { c.TLS.CA = "" }, []string{"an authority this machine does not trust", "--cacert"}},
		{"no client certificate", func(c *etcdclient.Config) { c.TLS.Cert, c.TLS.Key = "", "" }, []string{"requires a client certificate: give one with --cert and --key"}},
		{"a client certificate of another CA", func(c *etcdclient.Config) { c.TLS.Cert, c.TLS.Key = foreign.CertFile, foreign.KeyFile }, []string{"does not trust the client certificate --cert " + foreign.CertFile}},
		{"an expired certificate", func(c *etcdclient.Config) { c.TLS.Cert, c.TLS.Key = expired.CertFile, expired.KeyFile }, []string{"--cert " + expired.CertFile, "expired on"}},
		{"a key that is not the certificate's", func(c *etcdclient.Config) { c.TLS.Key = sec.Member.KeyFile }, []string{"--key " + sec.Member.KeyFile + " is not the key of --cert"}},
		{"the wrong password", func(c *etcdclient.Config) { c.PasswordFile = wrongPassword }, []string{`etcd user "backup" did not log in`, "the password in " + wrongPassword + " is wrong"}},
		{"a user without the root role", func(c *etcdclient.Config) { c.User, c.PasswordFile = "reader", sec.PasswordFile("reader") }, []string{`etcd user "reader" has the roles [reader] but not "root"`, "etcdctl user grant-role reader root"}},
		{"a password with the user", func(c *etcdclient.Config) { c.User = "backup:secret" }, []string{`"backup:…"`, "put the password in a file"}},
		{"a user without a password file", func(c *etcdclient.Config) { c.PasswordFile = "" }, []string{`etcd user "backup" has no password file`}},
		{"http:// to a member that serves TLS", func(c *etcdclient.Config) { c.Endpoints = []string{plain} }, []string{"serves TLS at this address: use an https:// URL"}},
		{"mixed schemes", func(c *etcdclient.Config) { c.Endpoints = []string{eps[0], "http://127.0.0.1:1"} }, []string{"mix http:// and https://"}},
		{"not a URL", func(c *etcdclient.Config) { c.Endpoints = []string{"127.0.0.1:2379"} }, []string{`endpoint "127.0.0.1:2379": give a client URL`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			_, err := dial(t, cfg)
			wantErr(t, err, tc.want...)
			if !errors.Is(err, etcdclient.ErrSettings) {
				t.Errorf("%v is not marked as a settings error", err)
			}
		})
	}

	// insecure-skip-tls-verify takes any server certificate, and says so.
	var logged strings.Builder
	insecure := good
	insecure.TLS.CA, insecure.TLS.InsecureSkipVerify = stranger.File, true
	insecure.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	if _, err := dial(t, insecure); err != nil {
		t.Fatalf("insecure-skip-tls-verify: %v", err)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "not verified") {
		t.Errorf("insecure-skip-tls-verify logged no warning: %q", logged.String())
	}

	// Without a user, the client certificate's common name is the user.
	byCert := good
	byCert.User, byCert.PasswordFile = "", ""
	_, err = dial(t, byCert)
	wantErr(t, err, `etcd user "etcdtest" (the client certificate's common name)`)
	if _, err := cli.UserAddWithOptions(context.Background(), "etcdtest", "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(context.Background(), "etcdtest", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, byCert); err != nil {
		t.Fatalf("the certificate's user with the root role: %v", err)
	}
}

// https:// to a member without TLS says to use http://; no member at all
// is ErrUnreachable.
func TestPlainMemberAndNone(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	_, err := dial(t, etcdclient.Config{Endpoints: []string{strings.Replace(c.Endpoints()[0], "http://", "https://", 1)}})
	wantErr(t, err, "does not serve TLS at this address: use an http:// URL")
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, err = dial(t, etcdclient.Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", port)}})
	if !errors.Is(err, etcdclient.ErrUnreachable) {
		t.Fatalf("no member: %v, want ErrUnreachable", err)
	}
	// One member of two answering is enough.
	cli, err := dial(t, etcdclient.Config{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", port), c.Endpoints()[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(context.Background(), "/"); err != nil {
		t.Fatal(err)
	}
}

// A call made without a deadline gets RequestTimeout: a cluster that lost
// its quorum does not hold a caller forever.
func TestCallsAreBounded(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli, err := dial(t, etcdclient.Config{Endpoints: c.Endpoints()[:1], RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Members[1].Kill()
	c.Members[2].Kill()
	start := time.Now()
	_, err = cli.Put(context.Background(), "/k", "v")
	took := time.Since(start)
	t.Logf("put returned after %s: %v", took, err)
	// The deadline travels with the call, so the member may answer it
	// first ("request timed out") or the client notice it first; either is
	// the request timeout. What tells it from the member's own proposal
	// timeout (5 s and two election timeouts) is that it came before that.
	timedOut := errors.Is(err, context.DeadlineExceeded)
	for _, byMember := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutDueToLeaderFail} {
		timedOut = timedOut || errors.Is(err, byMember)
	}
	if !timedOut {
		t.Fatalf("a put without quorum: %v, want the request timeout", err)
	}
	if own := 5*time.Second + 2*time.Duration(c.Members[0].Config().ElectionMs)*time.Millisecond; took >= own {
		t.Fatalf("the put ended after %s, at the member's own timeout of %s, not the client's 1 s", took, own)
	}
}

// A client certificate replaced on disk is the one the next connection
// presents: with authentication by certificate, the new certificate's
// user is the one etcd sees.
func TestRotatedCertificateIsUsed(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true, UnsafeNoFsync: true})
	admin := c.Client(t)
	ctx := context.Background()
	for user, role := range map[string]string{"old-identity": "reader", "new-identity": "root"} {
		if _, err := admin.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.UserGrantRole(ctx, user, role); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	install := func(l pki.Leaf) {
		if err := l.Install(certFile, keyFile); err != nil {
			t.Fatal(err)
		}
	}
	install(c.Security.CA.Issue(t, "old", pki.LeafOptions{CommonName: "old-identity", ClientOnly: true}))
	cli, err := dial(t, etcdclient.Config{Endpoints: c.Endpoints(), TLS: tlsfiles.Files{CA: c.Security.CA.File, Cert: certFile, Key: keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	ep := c.Endpoints()[0]
	// A maintenance call to one endpoint opens a connection of its own.
	if _, err := cli.HashKV(ctx, ep, 0); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("as a reader: %v, want permission denied", err)
	}
	install(c.Security.CA.Issue(t, "new", pki.LeafOptions{CommonName: "new-identity", ClientOnly: true}))
	if _, err := cli.HashKV(ctx, ep, 0); err != nil {
		t.Fatalf("after the rotation, as new-identity: %v", err)
	}
	// The connection made before the rotation still serves.
	if _, err := cli.Get(ctx, "/"); err != nil {
		t.Fatal(err)
	}
}

// A member that accepts connections and answers nothing (one replaying
// its log) fails New as no answer; with AllowUnreachable the client goes
// on, as for a member that is down.
func TestClientOfASilentMember(t *testing.T) {
	addr := etcdtest.Silent(t)
	cfg := etcdclient.Config{Endpoints: []string{"http://" + addr}, RequireRoot: true, RequestTimeout: time.Second, DialTimeout: time.Second}
	if _, err := dial(t, cfg); err == nil || !strings.Contains(err.Error(), "no answer within the request timeout") {
		t.Fatalf("without AllowUnreachable: %v", err)
	}
	cfg.AllowUnreachable = true
	if _, err := dial(t, cfg); err != nil {
		t.Fatalf("with AllowUnreachable: %v", err)
	}
}

// With AllowUnreachable, a client made while its member is down logs in
// once the member is back, and a stream opened first (a snapshot) works.
func TestClientBeforeItsMember(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true, UnsafeNoFsync: true})
	if _, err := c.Client(t).Put(context.Background(), "/before", "v"); err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	m.Stop()
	cfg := c.ClientConfig()
	cfg.User, cfg.PasswordFile = "backup", c.Security.PasswordFile("backup")
	if _, err := dial(t, cfg); !errors.Is(err, etcdclient.ErrUnreachable) {
		t.Fatalf("without AllowUnreachable: %v", err)
	}
	cfg.AllowUnreachable = true
	cli, err := dial(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	etcdtest.Eventually(t, "the client logs in", 20*time.Second, func() bool {
		_, err := cli.UserGet(ctx, "backup")
		return err == nil
	})
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	n, err := io.Copy(io.Discard, rc)
	if err != nil || n == 0 {
		t.Fatalf("snapshot: %d bytes, %v", n, err)
	}
}

// A client made while authentication is off logs in once it is turned
// on, rather than going on as its certificate's common name.
func TestAuthenticationTurnedOnLater(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	late := c.ClientConfig()
	late.User, late.PasswordFile = "root", pw
	cli, err := dial(t, late)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/before", "v"); err != nil {
		t.Fatal(err)
	}
	admin := c.Client(t)
	if _, err := admin.UserAdd(ctx, "root", "secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/after", "v"); err != nil {
		t.Fatalf("after authentication was turned on: %v", err)
	}
}

// A member whose certificate names another host than the one dialled (a
// pod's address, a certificate for the Service's name) is refused with
// what to set, and reached with that server name.
func TestServerName(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	sec := c.Security
	// etcd reads its certificate again at each handshake.
	if err := sec.CA.Issue(t, "renamed", pki.LeafOptions{Hosts: []string{"etcd-main-local"}}).Install(sec.Member.CertFile, sec.Member.KeyFile); err != nil {
		t.Fatal(err)
	}
	files := tlsfiles.Files{CA: sec.CA.File, Cert: sec.Client.CertFile, Key: sec.Client.KeyFile}
	_, err := dial(t, etcdclient.Config{Endpoints: c.Endpoints(), TLS: files})
	wantErr(t, err, `not for "127.0.0.1"`, "etcd-main-local", "--server-name")
	files.ServerName = "etcd-main-local"
	cli, err := dial(t, etcdclient.Config{Endpoints: c.Endpoints(), TLS: files})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	// A maintenance call to one endpoint opens a connection of its own.
	if _, err := cli.Status(ctx, c.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
}
