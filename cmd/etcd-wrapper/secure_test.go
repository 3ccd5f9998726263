package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// secure is a cluster's certificates and users, as an operator would
// issue them: members serve clients and peers over TLS and require client
// certificates; authentication is on once the cluster runs.
type secure struct {
	dir string
	ca  *pki.CA
	// member serves etcd's clients and peers; wrapper is the client
	// certificate etcd's configuration gives (client-cert-file), whose
	// common name is a user with the root role, so the wrapper needs no
	// flag of its own; backup is the sidecar's client certificate for
	// etcd (it logs in as the user backup); api serves the sidecars'
	// APIs; operator is the tests' own.
	member, wrapper, backup, api, operator pki.Leaf
}

func newSecure(t *testing.T) *secure {
	t.Helper()
	s := &secure{dir: t.TempDir()}
	s.ca = pki.NewCA(t, s.dir, "ca")
	s.member = s.ca.Issue(t, "member", pki.LeafOptions{CommonName: "etcd-member"})
	s.wrapper = s.ca.Issue(t, "wrapper", pki.LeafOptions{CommonName: "etcd-wrapper", ClientOnly: true})
	s.backup = s.ca.Issue(t, "backup", pki.LeafOptions{CommonName: "etcd-backup"})
	s.api = s.ca.Issue(t, "api", pki.LeafOptions{CommonName: "sidecar-api"})
	s.operator = s.ca.Issue(t, "operator", pki.LeafOptions{CommonName: "operator", ClientOnly: true})
	for _, u := range []string{"root", "backup"} {
		if err := os.WriteFile(s.passwordFile(u), []byte("pw-of-"+u+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *secure) passwordFile(user string) string { return filepath.Join(s.dir, user+".password") }

// scheme is the URL scheme of the members.
func (s *secure) scheme() string {
	if s == nil {
		return "http"
	}
	return "https"
}

// yaml is the transport security of etcd's configuration file.
func (s *secure) yaml() string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf(`client-transport-security:
  cert-file: %[1]s
  key-file: %[2]s
  client-cert-file: %[3]s
  client-key-file: %[4]s
  client-cert-auth: true
  trusted-ca-file: %[5]s
peer-transport-security:
  cert-file: %[1]s
  key-file: %[2]s
  client-cert-auth: true
  trusted-ca-file: %[5]s
`, s.member.CertFile, s.member.KeyFile, s.wrapper.CertFile, s.wrapper.KeyFile, s.ca.File)
}

// conn is how the tests reach the members: the operator's certificate,
// logged in as root once authentication is on.
func (s *secure) conn(eps string) etcdclient.Config {
	c := etcdclient.Config{Endpoints: strings.Split(eps, ",")}
	if s != nil {
		c.TLS = tlsfiles.Files{CA: s.ca.File, Cert: s.operator.CertFile, Key: s.operator.KeyFile}
		c.User, c.PasswordFile = "root", s.passwordFile("root")
	}
	return c
}

// enableAuth adds root, backup and the wrapper's certificate user, each
// with the root role, turns authentication on, and returns a client of the
// same endpoints logged in as root. cli, made while authentication was
// off, holds no token: etcd takes its calls as its certificate's common
// name, a user that does not exist, from whenever a member has applied
// the change.
func (s *secure) enableAuth(t *testing.T, cli *clientv3.Client) *clientv3.Client {
	t.Helper()
	ctx := context.Background()
	for _, u := range []string{"root", "backup", "etcd-wrapper"} {
		var err error
		if u == "etcd-wrapper" {
			_, err = cli.UserAddWithOptions(ctx, u, "", &clientv3.UserAddOptions{NoPassword: true})
		} else {
			var b []byte
			if b, err = os.ReadFile(s.passwordFile(u)); err == nil {
				_, err = cli.UserAdd(ctx, u, strings.TrimSpace(string(b)))
			}
		}
		if err == nil {
			_, err = cli.UserGrantRole(ctx, u, "root")
		}
		if err != nil {
			t.Fatalf("user %s: %v", u, err)
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	return client(t, strings.Join(cli.Endpoints(), ","), s)
}

// backupFlags are etcd-backup's flags for etcd and for its API: HTTPS
// with client certificates, between sidecars too.
func (s *secure) backupFlags() []string {
	if s == nil {
		return nil
	}
	return []string{"--cacert", s.ca.File, "--cert", s.backup.CertFile, "--key", s.backup.KeyFile,
		"--user", "backup", "--password-file", s.passwordFile("backup"),
		"--tls-cert", s.api.CertFile, "--tls-key", s.api.KeyFile, "--client-ca", s.ca.File,
		"--sidecar-cacert", s.ca.File, "--sidecar-cert", s.backup.CertFile, "--sidecar-key", s.backup.KeyFile}
}

// sidecar is a client of a sidecar's API with the operator's certificate.
func (s *secure) sidecar(url string) *api.Client {
	return &api.Client{URL: url, TLS: tlsfiles.Files{CA: s.ca.File, Cert: s.operator.CertFile, Key: s.operator.KeyFile}}
}
