package etcdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// Security is what a cluster started with TLS or authentication needs
// from its clients: the CA, certificates and the users' password files.
type Security struct {
	// CA signed every certificate below; nil without TLS.
	CA *pki.CA
	// Member is each member's certificate, for clients and peers, server
	// and client use, common name "etcd-member".
	Member pki.Leaf
	// Client is a client certificate, common name "etcdtest".
	Client pki.Leaf
	// ClientCA is the bundle members trust for client certificates; ""
	// is CA.File. A test that rotates what members accept changes it and
	// restarts them.
	ClientCA string
	// Dir holds the files.
	Dir string
	// Auth: Options.Auth, the users exist.
	Auth bool
}

func newSecurity(t testing.TB, opts Options) *Security {
	t.Helper()
	if opts.Security != nil {
		return opts.Security
	}
	if !opts.TLS && !opts.Auth {
		return nil
	}
	s := &Security{Dir: filepath.Join(opts.Dir, "security"), Auth: opts.Auth}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	if opts.TLS {
		s.CA = pki.NewCA(t, s.Dir, "ca")
		s.Member = s.CA.Issue(t, "member", pki.LeafOptions{CommonName: "etcd-member"})
		s.Client = s.CA.Issue(t, "client", pki.LeafOptions{CommonName: "etcdtest", ClientOnly: true})
	}
	if opts.Auth {
		for _, u := range Users {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			if err := os.WriteFile(s.PasswordFile(u), []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
				t.Fatalf("etcdtest: %v", err)
			}
		}
	}
	return s
}

// PasswordFile is the file holding a user's password.
func (s *Security) PasswordFile(user string) string {
	return filepath.Join(s.Dir, user+".password")
}

// TLSFiles are the files of a client of the cluster: the CA and the
// client certificate. The zero value without TLS.
func (s *Security) TLSFiles() tlsfiles.Files {
	if s == nil || s.CA == nil {
		return tlsfiles.Files{}
	}
	return tlsfiles.Files{CA: s.CA.File, Cert: s.Client.CertFile, Key: s.Client.KeyFile}
}

// scheme is the members' URL scheme.
func (s *Security) scheme() string {
	if s == nil || s.CA == nil {
		return "http"
	}
	return "https"
}

// freeURLs are a peer and a client URL on free ports.
func (s *Security) freeURLs() (peer, client url.URL, err error) {
	peer, client, err = FreeURLs()
	peer.Scheme, client.Scheme = s.scheme(), s.scheme()
	return peer, client, err
}

// clientConfig is how this package's clients connect.
func (s *Security) clientConfig(endpoints []string) etcdclient.Config {
	c := etcdclient.Config{Endpoints: endpoints, TLS: s.TLSFiles()}
	if s != nil && s.Auth {
		c.User, c.PasswordFile = "root", s.PasswordFile("root")
	}
	return c
}

// configure serves the member's clients and peers over TLS, with client
// certificates required on both.
func (s *Security) configure(cfg *embed.Config) {
	if s == nil || s.CA == nil {
		return
	}
	peer := transport.TLSInfo{CertFile: s.Member.CertFile, KeyFile: s.Member.KeyFile, TrustedCAFile: s.CA.File, ClientCertAuth: true}
	client := peer
	if s.ClientCA != "" {
		client.TrustedCAFile = s.ClientCA
	}
	cfg.ClientTLSInfo, cfg.PeerTLSInfo = client, peer
}

// enableAuth adds the users and turns authentication on.
func (s *Security) enableAuth(ctx context.Context, endpoints []string) error {
	cli, err := etcdclient.New(ctx, s.clientConfig(endpoints))
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.RoleAdd(ctx, "reader"); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if _, err := cli.RoleGrantPermission(ctx, "reader", "\x00", "\x00", clientv3.PermissionType(clientv3.PermRead)); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	for _, u := range Users {
		role := "root"
		if u == "reader" {
			role = "reader"
		}
		pw, err := os.ReadFile(s.PasswordFile(u))
		if err != nil {
			return err
		}
		if _, err := cli.UserAdd(ctx, u, strings.TrimSuffix(string(pw), "\n")); err != nil {
			return fmt.Errorf("auth: add user %s: %w", u, err)
		}
		if _, err := cli.UserGrantRole(ctx, u, role); err != nil {
			return fmt.Errorf("auth: grant %s to %s: %w", role, u, err)
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("auth: enable: %w", err)
	}
	return nil
}
