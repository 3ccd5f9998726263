package sidecar_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/sidecar/api"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/defrag"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// The uploader's duties besides snapshots: defragmentation on its
// schedule, compaction of the chain past its threshold.
func TestScheduledDefragAndChainCompaction(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	s := newSetup(t)
	sc, err := sidecar.New(sidecar.Options{
		Client:     cli,
		Endpoint:   c.Members[0].ClientURL.String(),
		Backups:    sidecar.BackupOptions{Store: s.st, Snapshots: capture.Options{FullSchedule: "@every 1h", DeltaPeriod: 100 * time.Millisecond, RetentionPeriod: capture.Off}, CompactAfter: 200},
		WorkDir:    t.TempDir(),
		Defrag:     sidecar.DefragOptions{Schedule: "@every 1s", Options: defrag.Options{CompactKeyspace: true, Pause: -1, Policy: defrag.Policy{MinFreeRatio: 0.5}}},
		Membership: sidecar.MembershipOptions{Follow: memberFollow},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = sc.Run(rctx) }()
	defer func() { cancel(); <-done }()
	etcdtest.Eventually(t, "uploader", 10*time.Second, sc.Uploader)

	// Fragment the database: the scheduled run, compacting first, must
	// give the space back.
	value := strings.Repeat("v", 16<<10)
	for i := range 300 {
		if _, err := cli.Put(ctx, "/frag/"+string(rune('a'+i%26))+strings.Repeat("k", i%40), value); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "/frag/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	before, err := cli.Status(ctx, c.Members[0].ClientURL.String())
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the scheduled defragmentation shrinks the database", 20*time.Second, func() bool {
		st, err := cli.Status(ctx, c.Members[0].ClientURL.String())
		return err == nil && st.DbSize < before.DbSize/2
	})

	// 300 puts and a delete are past 200 revisions of deltas: a second
	// full snapshot appears, made from the chain.
	etcdtest.Eventually(t, "the chain is compacted into a new full snapshot", 30*time.Second, func() bool {
		cat, err := snapshot.List(ctx, s.st)
		return err == nil && len(cat.Fulls()) >= 2
	})
}

// A sidecar beside a learner promotes it once it has caught up.
func TestPromotesItsLearner(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	m := c.AddMember(t, etcdtest.AddMemberOptions{Learner: true})
	s := newSetup(t)
	s.start(t, c, m)
	etcdtest.Eventually(t, "the learner is promoted", 60*time.Second, func() bool {
		st, err := member.Inspect(context.Background(), c.Client(t), member.InspectOptions{})
		if err != nil {
			return false
		}
		for _, x := range st {
			if x.Name == m.Name {
				return !x.Learner
			}
		}
		return false
	})
}

// Over HTTPS with client certificates, a verified certificate is the
// credential; without one the token still is. A client without the CA
// bundle, or with an http:// URL, is told which to fix.
func TestClientCertificates(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	s := newSetup(t)
	dir := t.TempDir()
	ca := pki.NewCA(t, dir, "ca")
	server := ca.Issue(t, "server", pki.LeafOptions{ServerOnly: true})
	client := ca.Issue(t, "operator", pki.LeafOptions{CommonName: "operator", ClientOnly: true})

	sc, err := sidecar.New(sidecar.Options{
		Client:   c.Client(t),
		Endpoint: c.Members[0].ClientURL.String(),
		Backups:  sidecar.BackupOptions{Store: s.st, Snapshots: capture.Options{RetentionPeriod: capture.Off}},
		WorkDir:  t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sc.Handler(sidecar.Auth{TokenFile: s.tokenFile, ClientCerts: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	if srv.TLS, err = (tlsfiles.Files{CA: ca.File, Cert: server.CertFile, Key: server.KeyFile}).NewServer(nil); err != nil {
		t.Fatal(err)
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = sc.Run(ctx); close(ran) }()
	defer func() { cancel(); <-ran }()
	etcdtest.Eventually(t, "the sidecar uploads", 10*time.Second, sc.Uploader)

	withCert := &api.Client{URL: srv.URL, TLS: tlsfiles.Files{CA: ca.File, Cert: client.CertFile, Key: client.KeyFile}}
	if _, err := withCert.Full(context.Background()); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
	if _, err := (&api.Client{URL: srv.URL, TLS: tlsfiles.Files{CA: ca.File}}).Full(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with neither certificate nor token: %v", err)
	}
	if _, err := (&api.Client{URL: srv.URL, Token: token, TLS: tlsfiles.Files{CA: ca.File}}).Full(context.Background()); err != nil {
		t.Errorf("with the token: %v", err)
	}
	noCA := &api.Client{URL: srv.URL, Token: token, TLS: tlsfiles.Files{Names: tlsfiles.Names{CA: "--sidecar-cacert"}}}
	if _, err := noCA.Full(context.Background()); err == nil || !strings.Contains(err.Error(), "give the CA bundle that signed it with --sidecar-cacert") {
		t.Errorf("without the CA bundle: %v", err)
	}
	plain := &api.Client{URL: strings.Replace(srv.URL, "https://", "http://", 1), Token: token}
	if _, err := plain.Full(context.Background()); err == nil || !strings.Contains(err.Error(), "use an https:// URL") {
		t.Errorf("http:// to the HTTPS API: %v", err)
	}
}
