package sidecar_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/defrag"
	"github.com/etcdkit/etcdkit/internal/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/snapshot"
)

// The uploader's duties besides snapshots: defragmentation on its
// schedule, compaction of the chain past its threshold.
func TestScheduledDefragAndChainCompaction(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	s := newSetup(t)
	sc, err := sidecar.New(sidecar.Options{
		Client: cli, Endpoint: c.Members[0].ClientURL.String(), Store: s.st, TokenFile: s.tokenFile, WorkDir: t.TempDir(),
		Snapshots:      snapshot.Options{FullSchedule: "@every 1h", DeltaPeriod: 100 * time.Millisecond, RetentionPeriod: -1},
		DefragSchedule: "@every 1s",
		Defrag:         defrag.Options{Compact: true, Pause: -1, Policy: defrag.Policy{MinFreeRatio: 0.5}},
		CompactAfter:   200, Follow: memberFollow,
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
// credential; without one the token still is.
func TestClientCertificates(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	s := newSetup(t)
	ca, caKey := newCA(t)
	serverCert := leaf(t, ca, caKey, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	clientCert := leaf(t, ca, caKey, "operator", x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	sc, err := sidecar.New(sidecar.Options{
		Client: c.Client(t), Endpoint: c.Members[0].ClientURL.String(), Store: s.st,
		TokenFile: s.tokenFile, ClientCertAuth: true, WorkDir: t.TempDir(),
		Snapshots: snapshot.Options{RetentionPeriod: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(sc.Handler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	get := func(certs []tls.Certificate, token string) int {
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12}}}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/snapshots", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := get([]tls.Certificate{clientCert}, ""); code != http.StatusOK {
		t.Errorf("with a client certificate: %d", code)
	}
	if code := get(nil, ""); code != http.StatusUnauthorized {
		t.Errorf("with neither certificate nor token: %d", code)
	}
	if code := get(nil, token); code != http.StatusOK {
		t.Errorf("with the token: %d", code)
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdkit test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
