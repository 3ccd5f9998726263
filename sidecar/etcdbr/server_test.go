package etcdbr_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/upgrade"
)

// druidConf is the ConfigMap's etcd.conf.yaml as etcd-druid's newest
// builder writes it for pod etcd-main-0 of a cluster of members, with TLS
// on client and peer: additional advertise peer URLs (two per member),
// the freelist type, next-cluster-version-compatible and the peers'
// skip-client-san-verification.
func druidConf(t *testing.T, sec *etcdtest.Security, members int, peer, client string) map[string]any {
	t.Helper()
	var initial []string
	peers, clients := map[string]any{}, map[string]any{}
	for i := range members {
		// etcd-druid's member-name-prefix names the members "p-<pod>".
		name := "p-etcd-main-" + string(rune('0'+i))
		p, c := peer, client
		if i > 0 {
			// Members that are not up: ports nobody listens on.
			pu, cu, err := etcdtest.FreeURLs()
			if err != nil {
				t.Fatal(err)
			}
			p, c = "https://"+pu.Host, "https://"+cu.Host
		}
		extra := "https://" + name[2:] + ".other-network.example:2380"
		initial = append(initial, name+"="+p, name+"="+extra)
		peers[name] = []any{p, extra}
		clients[name] = []any{c}
	}
	tlsKeys := func() map[string]any {
		return map[string]any{"cert-file": sec.Member.CertFile, "key-file": sec.Member.KeyFile, "client-cert-auth": true,
			"trusted-ca-file": sec.CA.File, "auto-tls": false}
	}
	peerTLS := tlsKeys()
	peerTLS["skip-client-san-verification"] = true
	return map[string]any{
		"name": "etcd-config", "data-dir": filepath.Join(t.TempDir(), "new.etcd"), "metrics": "basic", "snapshot-count": 10000,
		"enable-grpc-gateway": false, "quota-backend-bytes": 8589934592, "initial-cluster-token": "etcd-cluster",
		"initial-cluster-state": "new", "initial-cluster": strings.Join(initial, ","), "auto-compaction-mode": "periodic",
		"auto-compaction-retention": "30m", "listen-peer-urls": "https://0.0.0.0:2380", "listen-client-urls": "https://0.0.0.0:2379",
		"initial-advertise-peer-urls": peers, "advertise-client-urls": clients, "client-transport-security": tlsKeys(),
		"peer-transport-security": peerTLS, "next-cluster-version-compatible": true, "backend-bbolt-freelist-type": "array",
		"member-name-prefix": "p",
	}
}

// compat is the compat server over a sidecar beside a TLS member, served
// over HTTPS with the member's certificate as etcd-druid mounts it, and
// the client EtcdOpsTask uses: the backup-restore-ca's CA, no deadline of
// its own (a full may take many minutes).
type compat struct {
	url string
	hc  *http.Client
	srv *etcdbr.Server
}

func startCompat(t *testing.T, cli *clientv3.Client, endpoint string, sec *etcdtest.Security, conf map[string]any, st store.Store) *compat {
	t.Helper()
	ec, err := etcdbr.EtcdConfOf("etcd.conf.yaml", conf)
	if err != nil {
		t.Fatal(err)
	}
	o := sidecar.Options{
		Client:   cli,
		Endpoint: endpoint,
		WorkDir:  t.TempDir(),
		Backups:  sidecar.BackupOptions{Snapshots: capture.Options{FullSchedule: "@every 1h", DeltaPeriod: time.Hour, RetentionPeriod: capture.Off, MinBackoff: 100 * time.Millisecond}},
	}
	if st != nil {
		o.Backups.Store = st
	}
	c := etcdbr.Config{EtcdConf: ec, Pod: "etcd-main-0", TLS: true}
	c.Startup.Conn.TLS = sec.TLSFiles()
	srv, err := etcdbr.New(o, c)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(sec.Member.CertFile, sec.Member.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	hs.StartTLS()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Sidecar().Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		hs.Close()
	})
	pem, err := os.ReadFile(sec.CA.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &compat{url: hs.URL, srv: srv, hc: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}
}

// post sends what EtcdOpsTask sends; ctx is the caller's patience.
func (c *compat) post(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

type taken struct {
	Kind     string `json:"kind"`
	SnapName string `json:"snapName"`
	IsFinal  bool   `json:"isFinal"`
}

func decodeTaken(t *testing.T, what string, code int, body string, err error) taken {
	t.Helper()
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s: %d %q %v", what, code, body, err)
	}
	var s taken
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("%s: %q: %v", what, body, err)
	}
	return s
}

// On-demand snapshots as etcd-druid's EtcdOpsTask sends them: POST over
// TLS trusting the backup-restore CA, 200 only on success. A full asked
// for while one runs waits for it and answers its result; the retry of a
// caller that gave up (etcd-druid#1259: a 12-minute full, a 10-minute
// client timeout) gets the full it started, not a second stream from the
// leader; a final full after that is a new one.
func TestOnDemandSnapshotsAsEtcdOpsTaskSendsThem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	cli := c.Client(t)
	m := c.Members[0]
	fs, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := chaintest.NewHeldFulls(fs)
	cp := startCompat(t, cli, m.ClientURL.String(), c.Security, druidConf(t, c.Security, 1, m.PeerURL.String(), m.ClientURL.String()), st)
	// Its first full done, not only uploaded: a call before its end would
	// join it.
	etcdtest.Eventually(t, "the first full", time.Minute, func() bool {
		return cp.srv.Sidecar().SnapshotStatus().LastFull.Key != ""
	})
	if _, err := cli.Put(ctx, "/registry/a", "1"); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		code int
		body string
		err  error
	}
	ask := func(ctx context.Context, path string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			code, body, err := cp.post(ctx, path)
			ch <- answer{code, body, err}
		}()
		return ch
	}

	// Two calls, the second while the first's full uploads: one full.
	st.Armed.Store(true)
	first := ask(ctx, "/snapshot/full")
	held := entered(ctx, t, st)
	second := ask(ctx, "/snapshot/full")
	etcdtest.Eventually(t, "the second call reaches the snapshotter", 10*time.Second, func() bool {
		return cp.srv.Sidecar().SnapshotStatus().Demanded == 2
	})
	// It waits on the first's full: no answer while the upload is held.
	select {
	case a := <-second:
		t.Fatalf("the second call was answered while the first's full uploads: %d %s %v", a.code, a.body, a.err)
	default:
	}
	st.Release <- struct{}{}
	a, b := <-first, <-second
	fa := decodeTaken(t, "the first call", a.code, a.body, a.err)
	fb := decodeTaken(t, "the call during its upload", b.code, b.body, b.err)
	if fa.SnapName != fb.SnapName || fa.Kind != "Full" || fa.SnapName != filepath.Base(held) {
		t.Fatalf("the first call got %+v, the one during its upload %+v; the upload held was %s", fa, fb, held)
	}

	// A caller gives up while its full uploads; its retry gets that full.
	if _, err := cli.Put(ctx, "/registry/b", "2"); err != nil {
		t.Fatal(err)
	}
	st.Armed.Store(true)
	impatient, giveUp := context.WithCancel(ctx)
	gaveUp := ask(impatient, "/snapshot/full")
	held = entered(ctx, t, st)
	giveUp()
	// The caller sees its own cancel, or, when the server's answer to a
	// caller gone (500) crossed the closing connection, that answer:
	// never the full, which is still held.
	if a := <-gaveUp; !errors.Is(a.err, context.Canceled) && (a.err != nil || a.code != http.StatusInternalServerError) {
		t.Fatalf("the caller that gave up: %d %s %v", a.code, a.body, a.err)
	}
	etcdtest.Eventually(t, "the server sees the caller gave up", 10*time.Second, func() bool {
		return cp.srv.Sidecar().SnapshotStatus().Abandoned == 1
	})
	st.Release <- struct{}{}
	etcdtest.Eventually(t, "the full of the caller that gave up lands", time.Minute, func() bool {
		r, err := fs.Get(ctx, held)
		if err == nil {
			_ = r.Close()
		}
		return err == nil
	})
	code, body, err := cp.post(ctx, "/snapshot/full")
	if retry := decodeTaken(t, "the retry", code, body, err); retry.SnapName != filepath.Base(held) {
		t.Fatalf("the retry got %s, want the full its first call started (%s)", retry.SnapName, filepath.Base(held))
	}
	cat, err := snapshot.List(ctx, fs)
	if err != nil {
		t.Fatal(err)
	}
	fulls := 0
	for _, s := range cat.Snapshots {
		if s.Kind == snapshot.KindFull {
			fulls++
		}
	}
	if fulls != 3 {
		t.Fatalf("%d fulls in the store, want 3: the first, the joined one, the one retried", fulls)
	}

	// Hibernation's final full and a delta: new snapshots, 200.
	if _, err := cli.Put(ctx, "/registry/c", "3"); err != nil {
		t.Fatal(err)
	}
	code, body, err = cp.post(ctx, "/snapshot/delta")
	if d := decodeTaken(t, "POST /snapshot/delta", code, body, err); d.Kind != "Incr" {
		t.Fatalf("POST /snapshot/delta: %s", body)
	}
	code, body, err = cp.post(ctx, "/snapshot/full?final=true")
	if f := decodeTaken(t, "POST /snapshot/full?final=true", code, body, err); !f.IsFinal || f.SnapName == filepath.Base(held) {
		t.Fatalf("POST /snapshot/full?final=true: %s", body)
	}

	// The upgrade gate: this module's etcd is past 3.6, its membership
	// one store's; there is no step up from it, and a step to the release
	// it runs has nothing left to do.
	if code, rep := cp.upgradeCheck(ctx, t, ""); code != http.StatusServiceUnavailable || rep.Verdict != upgrade.Unknown || rep.From != "3.7" {
		t.Fatalf("/upgrade/check: %d %+v", code, rep)
	}
	if code, rep := cp.upgradeCheck(ctx, t, "3.7"); code != http.StatusOK || rep.Verdict != upgrade.Safe {
		t.Fatalf("/upgrade/check?to=3.7: %d %+v", code, rep)
	}
}

// entered waits for the held full's upload to begin.
func entered(ctx context.Context, t *testing.T, st *chaintest.HeldFulls) string {
	t.Helper()
	select {
	case key := <-st.Entered:
		return key
	case <-ctx.Done():
		t.Fatal("no full snapshot began")
		return ""
	}
}

// upgradeCheck asks the upgrade gate.
func (c *compat) upgradeCheck(ctx context.Context, t *testing.T, to string) (int, upgrade.Report) {
	t.Helper()
	url := c.url + "/upgrade/check"
	if to != "" {
		url += "?to=" + to
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var rep upgrade.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("/upgrade/check: %d: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, rep
}

// /config serves etcd-druid's newest keys through: the member's name with
// member-name-prefix, every advertise peer URL of the member (additional
// ones too), the freelist type, the peers'
// skip-client-san-verification, and the initial cluster with each URL; and
// a multi-member cluster's first start with no etcd up answers "new",
// never a 500 (etcd-backup-restore#1040: the state comes from learner
// presence alone, and no StatefulSet is read).
func TestConfigServesDruidsNewestKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sec := &etcdtest.Security{Dir: t.TempDir()}
	sec.CA = pki.NewCA(t, sec.Dir, "ca")
	sec.Member = sec.CA.Issue(t, "member", pki.LeafOptions{CommonName: "etcd-member"})
	sec.Client = sec.CA.Issue(t, "client", pki.LeafOptions{CommonName: "etcd-backup", ClientOnly: true})
	peer, client, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peerURL, clientURL := "https://"+peer.Host, "https://"+client.Host
	conf := druidConf(t, sec, 3, peerURL, clientURL)
	// No member runs: the client reaches nothing.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	cp := startCompat(t, cli, clientURL, sec, conf, nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.url+"/config", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cp.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	served, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/config with no etcd up: %d %s %v", resp.StatusCode, served, err)
	}
	got := map[string]any{}
	if err := yaml.Unmarshal(served, &got); err != nil {
		t.Fatal(err)
	}
	extra := "https://etcd-main-0.other-network.example:2380"
	for key, want := range map[string]any{
		"name": "p-etcd-main-0", "initial-cluster-state": "new", "initial-advertise-peer-urls": peerURL + "," + extra,
		"advertise-client-urls": clientURL, "initial-cluster": conf["initial-cluster"],
		"backend-bbolt-freelist-type": "array", "next-cluster-version-compatible": true,
	} {
		if got[key] != want {
			t.Errorf("/config's %s is %v, want %v", key, got[key], want)
		}
	}
	// etcd reads it as etcd-druid means it.
	path := filepath.Join(t.TempDir(), "etcd.conf.yaml")
	if err := os.WriteFile(path, served, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := embed.ConfigFromFile(path)
	if err != nil {
		t.Fatalf("etcd cannot read the served config: %v", err)
	}
	if !cfg.PeerTLSInfo.SkipClientSANVerify || cfg.BackendFreelistType != "array" || len(cfg.AdvertisePeerUrls) != 2 {
		t.Errorf("etcd reads skip-client-san-verification %v, freelist %q, %d advertise peer URLs",
			cfg.PeerTLSInfo.SkipClientSANVerify, cfg.BackendFreelistType, len(cfg.AdvertisePeerUrls))
	}
	if n := strings.Count(cfg.InitialCluster, "p-etcd-main-0="); n != 2 {
		t.Errorf("etcd's initial cluster names p-etcd-main-0 %d times, want once per URL: %s", n, cfg.InitialCluster)
	}
	// No member answers: the upgrade gate cannot tell, and says so.
	if code, rep := cp.upgradeCheck(ctx, t, ""); code != http.StatusServiceUnavailable || rep.Verdict != upgrade.Unknown {
		t.Errorf("/upgrade/check with no etcd up: %d %+v", code, rep)
	}
}
