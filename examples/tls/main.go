package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/examples/internal/demo"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/wrapper"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tls:", err)
		os.Exit(1)
	}
}

func run() error {
	// The whole story, and every call in it, within two minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	dir, err := os.MkdirTemp("", "etcdkit-tls-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	ca, issued, err := certificates(dir)
	if err != nil {
		return err
	}
	fmt.Println("made a CA and certificates for the member, the sidecar, its API and the operator")

	// etcd's configuration: https URLs, client-transport-security and
	// peer-transport-security, client certificates required on both.
	cfg, err := demo.Member(dir, "m0")
	if err != nil {
		return err
	}
	for _, us := range [][]url.URL{cfg.ListenClientUrls, cfg.AdvertiseClientUrls, cfg.ListenPeerUrls, cfg.AdvertisePeerUrls} {
		us[0].Scheme = "https"
	}
	cfg.InitialCluster = cfg.Name + "=" + cfg.AdvertisePeerUrls[0].String()
	m := issued["member"]
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: m.CertFile, KeyFile: m.KeyFile, TrustedCAFile: ca.File, ClientCertAuth: true}
	cfg.PeerTLSInfo = cfg.ClientTLSInfo

	// The wrapper reaches its member with what that configuration says.
	w, err := demo.Start(wrapper.Options{Config: cfg, Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	endpoint := cfg.AdvertiseClientUrls[0].String()
	fmt.Printf("the wrapper started the member at %s from etcd's configuration alone\n", endpoint)

	op := issued["operator"]
	admin, passwords, err := enableAuth(ctx, dir, endpoint, tlsfiles.Files{CA: ca.File, Cert: op.CertFile, Key: op.KeyFile})
	if err != nil {
		return err
	}
	defer func() { _ = admin.Close() }()
	fmt.Println("authentication is on: users root and backup")

	// The sidecar: its client certificate for etcd and the user backup;
	// its API over HTTPS, taking client certificates of the CA.
	b := issued["backup"]
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{endpoint},
		TLS:  tlsfiles.Files{CA: ca.File, Cert: b.CertFile, Key: b.KeyFile},
		User: "backup", PasswordFile: passwords["backup"], RequireRoot: true, Logger: log})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	st, err := store.Open(ctx, "file://"+filepath.Join(dir, "backups"))
	if err != nil {
		return err
	}
	sc, err := sidecar.New(sidecar.Options{
		Client:   cli,
		Endpoint: endpoint,
		// Fulls an hour after start, not on the hour: a scheduled full
		// between the operator's full and delta would leave the delta no
		// events to write.
		Backups:    sidecar.BackupOptions{Store: st, Snapshots: capture.Options{FullSchedule: "@every 1h", DeltaPeriod: time.Hour, RetentionPeriod: capture.Off}},
		WorkDir:    dir,
		Logger:     log,
		Membership: sidecar.MembershipOptions{Follow: member.FollowOptions{Interval: 100 * time.Millisecond}},
	})
	if err != nil {
		return err
	}
	a := issued["api"]
	serverTLS, err := tlsfiles.Files{CA: ca.File, Cert: a.CertFile, Key: a.KeyFile}.NewServer(log)
	if err != nil {
		return err
	}
	apiURL, stopSidecar, err := demo.Serve(sc, sidecar.ServeOptions{TLS: serverTLS, Auth: sidecar.Auth{ClientCerts: true}}, true)
	if err != nil {
		return err
	}
	defer stopSidecar()
	fmt.Printf("the sidecar logged in as backup and serves its API at %s\n", apiURL)

	// The operator asks the API for snapshots with a client certificate.
	written := map[string]string{}
	if err := demo.Write(ctx, admin, written, "tls", 200); err != nil {
		return err
	}
	client := &api.Client{URL: apiURL, TLS: tlsfiles.Files{CA: ca.File, Cert: op.CertFile, Key: op.KeyFile}}
	full, err := client.Full(ctx)
	if err != nil {
		return err
	}
	if err := demo.Write(ctx, admin, written, "tls-more", 100); err != nil {
		return err
	}
	delta, err := client.Delta(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("through the API with the operator's certificate: a full snapshot to revision %d, a delta to %d\n", full.LastRevision, delta.LastRevision)

	// Without the CA bundle, a client is told which setting to give.
	noCA := &api.Client{URL: apiURL, TLS: tlsfiles.Files{Names: tlsfiles.Names{CA: "--sidecar-cacert"}}}
	_, err = noCA.Full(ctx)
	fmt.Printf("a client without the CA bundle is told: %v\n", err)

	// The backup replays to what the cluster holds at its revision.
	return verify(ctx, st, admin)
}

// verify replays the backup and compares it with the cluster at its
// revision.
func verify(ctx context.Context, st store.Store, cli *clientv3.Client) error {
	rep, err := history.Verify(ctx, st, history.VerifyOptions{})
	if err != nil {
		return err
	}
	live, err := history.LiveDigest(ctx, cli, rep.Digest.Revision)
	if err != nil {
		return err
	}
	if live != rep.Digest {
		return fmt.Errorf("the backup sums to %+v, the cluster to %+v", rep.Digest, live)
	}
	fmt.Printf("the backup equals the cluster at revision %d: %d keys\n", rep.Digest.Revision, rep.Digest.Keys)
	return nil
}

// certificates are what an operator's PKI (cert-manager, a Secret) holds:
// the member's for clients and peers, the sidecar's for etcd and for its
// API, and the operator's.
func certificates(dir string) (*pki.CA, map[string]pki.Leaf, error) {
	ca, err := pki.MakeCA(dir, "ca")
	if err != nil {
		return nil, nil, err
	}
	issued := map[string]pki.Leaf{}
	for name, o := range map[string]pki.LeafOptions{
		"member":   {CommonName: "etcd-member"},
		"backup":   {CommonName: "etcd-backup", ClientOnly: true},
		"api":      {CommonName: "sidecar-api", ServerOnly: true},
		"operator": {CommonName: "operator", ClientOnly: true},
	} {
		if issued[name], err = ca.Make(name, o); err != nil {
			return nil, nil, err
		}
	}
	return ca, issued, nil
}

// enableAuth is the operator turning authentication on: root, and backup
// with the root role, which snapshots and defragmentation need. It
// returns the operator's client, logged in as root, and each user's
// password file.
func enableAuth(ctx context.Context, dir, endpoint string, tls tlsfiles.Files) (*clientv3.Client, map[string]string, error) {
	passwords := map[string]string{}
	for _, user := range []string{"root", "backup"} {
		passwords[user] = filepath.Join(dir, user+".password")
		if err := os.WriteFile(passwords[user], []byte("password of "+user+"\n"), 0o600); err != nil {
			return nil, nil, err
		}
	}
	// Logged in as root: until authentication is on, etcd ignores that.
	admin, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{endpoint}, TLS: tls, User: "root", PasswordFile: passwords["root"]})
	if err != nil {
		return nil, nil, err
	}
	err = func() error {
		for _, user := range []string{"root", "backup"} {
			if _, err := admin.UserAdd(ctx, user, "password of "+user); err != nil {
				return err
			}
			if _, err := admin.UserGrantRole(ctx, user, "root"); err != nil {
				return err
			}
		}
		_, err := admin.AuthEnable(ctx)
		return err
	}()
	if err != nil {
		_ = admin.Close()
		return nil, nil, err
	}
	return admin, passwords, nil
}
