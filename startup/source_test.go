package startup_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/member"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate"
)

// A sidecar that refuses the request is not waited out: the start-up
// fails at once with its message. One that does not answer yet is asked
// again until it does.
func TestRemoteRetriesOnlyWhatWaitingMends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error": "data_dir /etc is outside the restore root /var/lib"}`))
	}))
	defer refusing.Close()
	cfg := startup.Config{Member: member.Spec{Name: "m0", DataDir: "/etc", PeerURLs: []string{"http://m0:2380"}}}
	start := time.Now()
	_, err := startup.Remote{Client: &api.Client{URL: refusing.URL}, Wait: time.Minute}.Check(ctx, cfg)
	if !errors.Is(err, api.ErrRefused) || !strings.Contains(err.Error(), "outside the restore root") || time.Since(start) > 5*time.Second {
		t.Fatalf("a refusal after %s: %v", time.Since(start), err)
	}

	var calls atomic.Int32
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"verdict": "Empty", "reason": "no member directory", "backups": true, "backup_revision": 42}`))
	}))
	defer late.Close()
	chk, err := startup.Remote{Client: &api.Client{URL: late.URL}}.Check(ctx, cfg)
	if err != nil || chk.Verdict != "Empty" || !chk.Store || !chk.Backups || chk.BackupRevision != 42 || calls.Load() != 2 {
		t.Fatalf("after one 503: %+v, %v (%d calls)", chk, err, calls.Load())
	}
}

// listing counts the store's List calls under the snapshots' prefixes.
type listing struct {
	store.Store
	lists atomic.Int32
}

func (l *listing) List(ctx context.Context, prefix string) ([]store.Object, error) {
	if strings.HasPrefix(prefix, "v") {
		l.lists.Add(1)
	}
	return l.Store.List(ctx, prefix)
}

// A start-up lists the catalog once: the chain Check picked is the one
// Restore rebuilds, without a second listing.
func TestLocalReadsTheCatalogOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counted := &listing{Store: st}
	src := &startup.Local{Store: counted}
	// The member the backups name: same name, peer URL and token.
	m := c.Members[0]
	cfg := startup.Config{Member: member.Spec{Name: m.Name, DataDir: filepath.Join(t.TempDir(), m.Name), PeerURLs: []string{m.PeerURL.String()}, InitialCluster: m.Name + "=" + m.PeerURL.String(), Token: "etcdtest"}}
	chk, err := src.Check(ctx, cfg)
	if err != nil || chk.Verdict != validate.Empty || !chk.Backups || chk.BackupRevision != full.LastRevision {
		t.Fatalf("check: %+v, %v", chk, err)
	}
	listed := counted.lists.Load()
	res, err := src.Restore(ctx, cfg, startup.Plan{Action: startup.Restore, InitialCluster: cfg.Member.InitialCluster})
	if err != nil || res.Revision != full.LastRevision {
		t.Fatalf("restore: %+v, %v", res, err)
	}
	if n := counted.lists.Load(); n != listed {
		t.Fatalf("the restore listed the store again: %d lists after the check's %d", n, listed)
	}

	// The same member under another ID (its peer URL moved to TLS, or it
	// rejoined: etcd gave it a new ID) is still this cluster's: restored.
	moved := cfg
	moved.Member.DataDir, moved.Member.PeerURLs = filepath.Join(t.TempDir(), m.Name), []string{"https://127.0.0.1:2380"}
	moved.Member.InitialCluster = m.Name + "=https://127.0.0.1:2380"
	src = &startup.Local{Store: st}
	if _, err := src.Check(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Restore(ctx, moved, startup.Plan{Action: startup.Restore, InitialCluster: moved.Member.InitialCluster}); err != nil {
		t.Fatalf("the member under another peer URL: %v", err)
	}

	// A first site that holds nothing: the start-up finds the backups,
	// and restores them, on the second.
	empty, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	second := cfg
	second.Member.DataDir = filepath.Join(t.TempDir(), m.Name)
	src = &startup.Local{Store: empty, Secondary: st}
	if chk, err := src.Check(ctx, second); err != nil || !chk.Backups || chk.BackupRevision != full.LastRevision {
		t.Fatalf("check with an empty first site: %+v, %v", chk, err)
	}
	if res, err := src.Restore(ctx, second, startup.Plan{Action: startup.Restore, InitialCluster: second.Member.InitialCluster}); err != nil || res.Revision != full.LastRevision {
		t.Fatalf("restore from the second site: %+v, %v", res, err)
	}

	// A member of another cluster (another name, token and ID) pointed
	// at these backups is refused, and its data dir is not created.
	other := cfg
	other.Member.Name, other.Member.Token = "etcd-events-0", "another-cluster"
	other.Member.DataDir, other.Member.InitialCluster = filepath.Join(t.TempDir(), other.Member.Name), other.Member.Name+"="+m.PeerURL.String()
	src = &startup.Local{Store: st}
	if _, err := src.Check(ctx, other); err != nil {
		t.Fatal(err)
	}
	_, err = src.Restore(ctx, other, startup.Plan{Action: startup.Restore, InitialCluster: other.Member.InitialCluster})
	if !errors.Is(err, snapshot.ErrOtherCluster) || !strings.Contains(err.Error(), "etcd-backup restore") {
		t.Fatalf("another cluster's member restored from these backups: %v", err)
	}
	if _, err := os.Stat(other.Member.DataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused restore left %s: %v", other.Member.DataDir, err)
	}
}

// A lone member whose data dir etcd 3.5 ran (validate's fixture) is a
// fact, not damage: for etcd 3.7 the plan refuses, naming the releases
// that start on it, and nothing is moved aside or rebuilt; for etcd 3.5
// it restarts on it as it is.
func TestEtcd35DataDirIsAFact(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "m0")
	if err := os.CopyFS(dir, os.DirFS("../validate/testdata/etcd35")); err != nil {
		t.Fatal(err)
	}
	cfg := startup.Config{Member: member.Spec{Name: "etcd-main-0", DataDir: dir, PeerURLs: []string{"http://127.0.0.1:2380"}, InitialCluster: "etcd-main-0=http://127.0.0.1:2380"}}
	p, err := startup.Prepare(ctx, cfg, &startup.Local{}, startup.Options{})
	var refusal *startup.Refusal
	if !errors.As(err, &refusal) || p.Action != startup.Refuse || p.Hold ||
		!strings.Contains(p.Reason, "the data dir is OtherVersion") || !strings.Contains(p.Reason, "run etcd 3.5 on it") {
		t.Fatalf("etcd 3.7 on a 3.5 data dir: %+v, %v", p, err)
	}
	cfg.Etcd = etcdversion.MustParse("3.5.35")
	p, err = startup.Prepare(ctx, cfg, &startup.Local{}, startup.Options{})
	if err != nil || p.Action != startup.Restart {
		t.Fatalf("etcd 3.5 on its data dir: %+v, %v", p, err)
	}
	if aside, _ := filepath.Glob(dir + ".bak-*"); len(aside) != 0 {
		t.Fatalf("moved aside: %v", aside)
	}
}
