package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// Etcd is the flags of a connection to etcd, under etcdctl's names, plus
// --password-file: a password is never a flag value, which ps shows.
type Etcd struct {
	CACert, Cert, Key, ServerName string
	InsecureSkipVerify            bool
	User, PasswordFile            string
	DialTimeout, CommandTimeout   time.Duration
}

// etcdNames are how the flags are named in messages.
var etcdNames = tlsfiles.Names{CA: "--cacert", Cert: "--cert", Key: "--key", ServerName: "--server-name"}

// Flags registers the flags on fs.
func (e *Etcd) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&e.CACert, "cacert", "", "CA bundle that signed etcd's server certificates (default: the system's roots); read again when it changes")
	fs.StringVar(&e.Cert, "cert", "", "client certificate for etcd, when it requires one; read again when it changes")
	fs.StringVar(&e.Key, "key", "", "the client certificate's key")
	fs.StringVar(&e.ServerName, "server-name", "", "verify etcd's certificates for this name instead of each endpoint's host")
	fs.BoolVar(&e.InsecureSkipVerify, "insecure-skip-tls-verify", false, "do not verify etcd's certificates (logged as a warning: anyone on the path can read and change the traffic)")
	fs.StringVar(&e.User, "user", "", "etcd user to log in as, with --password-file")
	fs.StringVar(&e.PasswordFile, "password-file", "", "file holding the etcd user's password")
	fs.DurationVar(&e.DialTimeout, "dial-timeout", 5*time.Second, "bound on connecting to etcd and logging in")
	fs.DurationVar(&e.CommandTimeout, "command-timeout", 30*time.Second, "bound on each etcd request that has no deadline of its own")
}

// Check refuses what the command line must not hold.
func (e *Etcd) Check() error {
	if name, _, ok := strings.Cut(e.User, ":"); ok {
		return fmt.Errorf("--user %s:…: a password on the command line shows in ps; put it in a file and give --password-file", name)
	}
	return Durations{{"dial-timeout", e.DialTimeout, false}, {"command-timeout", e.CommandTimeout, false}}.Check()
}

// Apply puts the flags that were given over base, a connection that
// comes from elsewhere (etcd's own configuration, for the wrapper).
func (e *Etcd) Apply(base etcdclient.Config) etcdclient.Config {
	c := base
	t := &c.TLS
	if e.CACert != "" {
		t.CA, t.Names.CA = e.CACert, etcdNames.CA
	}
	if e.Cert != "" || e.Key != "" {
		t.Cert, t.Key, t.Names.Cert, t.Names.Key = e.Cert, e.Key, etcdNames.Cert, etcdNames.Key
	}
	if e.ServerName != "" {
		t.ServerName = e.ServerName
	}
	t.Names.ServerName = etcdNames.ServerName
	t.InsecureSkipVerify = t.InsecureSkipVerify || e.InsecureSkipVerify
	if e.User != "" || e.PasswordFile != "" {
		c.User, c.PasswordFile = e.User, e.PasswordFile
	}
	c.DialTimeout, c.RequestTimeout = e.DialTimeout, e.CommandTimeout
	return c
}

// Config is the connection the flags describe.
func (e *Etcd) Config() etcdclient.Config {
	return e.Apply(etcdclient.Config{TLS: tlsfiles.Files{Names: etcdNames}})
}

// KeepMovedAside is --keep-moved-aside, of every command that can move a
// data dir aside.
func KeepMovedAside(f *pflag.FlagSet, keep *int) {
	f.IntVar(keep, "keep-moved-aside", 1, "moved-aside data dirs (DATA_DIR.bak-<time>) that etcdkit built and etcd never wrote to kept, the newest, including the one just made; older ones are removed, and any other never is (-1: keep all)")
}
