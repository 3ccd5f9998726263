package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/internal/etcdtest"
)

// secureMember is one member with TLS, client certificates and
// authentication, and the flags that reach it as the backup user.
func secureMember(t *testing.T) (*etcdtest.Cluster, []string) {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true})
	return c, append([]string{"--endpoints", c.Endpoints()[0]}, connFlags(c.Security, "backup")...)
}

// startServe starts etcd-backup serve with a token ("tok") and fast
// periods; extra flags come last and win.
func startServe(t *testing.T, conn []string, storeURL string, extra ...string) *sidecarProc {
	t.Helper()
	return startServeIn(t, "", conn, storeURL, extra...)
}

// startServeIn is startServe with cwd as the working directory.
func startServeIn(t *testing.T, cwd string, conn []string, storeURL string, extra ...string) *sidecarProc {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &sidecarProc{name: "serve", url: fmt.Sprintf("http://127.0.0.1:%d", port), dir: cwd}
	p.args = append(append([]string{"serve", "--store", storeURL, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--token-file", token, "--delta-period", "200ms", "--full-schedule", "@every 1h", "--gc-period", "0s",
		"--follow-interval", "100ms", "--work-dir", filepath.Join(dir, "work")}, conn...), extra...)
	p.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", p.logs.String())
		}
	})
	return p
}

// Item: a spool directory that does not exist is an error naming it, not
// a panic; serve creates its work dir on a fresh volume.
func TestMissingSpoolDirectory(t *testing.T) {
	_, conn := secureMember(t)
	missing := filepath.Join(t.TempDir(), "nonexistent")
	for _, compression := range []string{"none", "gzip"} {
		r := etcdBackup(t, []string{"TMPDIR=" + missing}, append([]string{"snapshot", "--store", "mem://", "--compression", compression}, conn...)...)
		if r.code != 1 || strings.Contains(r.stderr, "panic") || !strings.Contains(r.stderr, missing) {
			t.Fatalf("snapshot with TMPDIR missing (%s): exit %d\n%s", compression, r.code, r.stderr)
		}
		t.Logf("a user sees: %s", strings.TrimSpace(r.stderr))
	}

	fresh := filepath.Join(t.TempDir(), "fresh-volume", "work")
	p := startServe(t, conn, "file://"+t.TempDir(), "--work-dir", fresh, "--compression", "gzip")
	etcdtest.Eventually(t, "serve uploads", 30*time.Second, func() bool {
		_, up := p.ready()
		return up
	})
	fi, err := os.Stat(fresh)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("work dir: %v %v", fi, err)
	}
	req := apiCall(t, p, "POST", "/v1/snapshots/full", "")
	if req.code != 200 {
		t.Fatalf("a full snapshot through a fresh work dir: %d %s", req.code, req.body)
	}
}

// answer is one API call's status and body.
type answer struct {
	code int
	body string
}

// apiCall calls the sidecar's API with the token startServe gave it;
// code 0 when nothing answered.
func apiCall(t *testing.T, p *sidecarProc, method, path string, body string) answer {
	t.Helper()
	return apiCallBody(t, p, method, path, bytes.NewReader([]byte(body)))
}

func apiCallBody(t *testing.T, p *sidecarProc, method, path string, body io.Reader) answer {
	t.Helper()
	req, err := http.NewRequest(method, p.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// Not serving yet: callers that wait read code 0.
		return answer{0, err.Error()}
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

// uploading waits until p uploads.
func uploading(t *testing.T, p *sidecarProc) {
	t.Helper()
	etcdtest.Eventually(t, "serve uploads", 30*time.Second, func() bool {
		_, up := p.ready()
		return up
	})
}

// Item: a restore over the data dir of a running etcd is refused, by the
// command and by the API, and the data dir stays as it was.
func TestRestoreRefusesARunningMembersDataDir(t *testing.T) {
	c, conn := secureMember(t)
	storeURL := "file://" + t.TempDir()
	ok(t, nil, append([]string{"snapshot", "--store", storeURL}, conn...)...)
	dataDir := c.Members[0].Config().Dir
	r := etcdBackup(t, nil, "restore", "--store", storeURL, "--data-dir", dataDir)
	if r.code != 1 || !strings.Contains(r.stderr, "stop etcd first") {
		t.Fatalf("restore over a running member: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("a user sees: %s", strings.TrimSpace(r.stderr))
	p := startServe(t, conn, storeURL, "--restore-root", filepath.Dir(dataDir))
	uploading(t, p)
	a := apiCall(t, p, "POST", "/v1/restore", `{"data_dir": "`+dataDir+`"}`)
	if a.code != http.StatusConflict || !strings.Contains(a.body, "stop etcd first") {
		t.Fatalf("POST /v1/restore over a running member: %d %s", a.code, a.body)
	}
	if aside, _ := filepath.Glob(dataDir + ".bak-*"); len(aside) != 0 {
		t.Fatalf("the running member's data dir was moved aside: %v", aside)
	}
	// The member still serves from its data dir.
	if _, err := c.Client(t).Put(t.Context(), "/still", "here"); err != nil {
		t.Fatal(err)
	}
}

// Item: the restore root is checked on the real path: a symlink under it
// that leads out is refused, a relative root works, a relative data_dir
// is refused, and a child named "..foo" is inside.
func TestRestoreRootFollowsLinks(t *testing.T) {
	_, conn := secureMember(t)
	storeURL := "file://" + t.TempDir()
	ok(t, nil, append([]string{"snapshot", "--store", storeURL}, conn...)...)
	cwd, outside := t.TempDir(), t.TempDir()
	root := filepath.Join(cwd, "restores")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	p := startServeIn(t, cwd, conn, storeURL, "--restore-root", "restores")
	uploading(t, p)
	for _, tc := range []struct {
		dataDir, want string
		code          int
	}{
		{filepath.Join(root, "link", "m0"), "outside the restore root", http.StatusForbidden},
		{filepath.Join(root, "link"), "outside the restore root", http.StatusForbidden},
		{filepath.Join(root, "..", "m0"), "outside the restore root", http.StatusForbidden},
		{"restores/m0", "give an absolute path", http.StatusBadRequest},
	} {
		a := apiCall(t, p, "POST", "/v1/restore", `{"data_dir": "`+tc.dataDir+`"}`)
		if a.code != tc.code || !strings.Contains(a.body, tc.want) {
			t.Errorf("data_dir %s: %d %s", tc.dataDir, a.code, a.body)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("a restore wrote outside the root: %v", entries)
	}
	inside := filepath.Join(root, "..foo")
	a := apiCall(t, p, "POST", "/v1/restore", `{"data_dir": "`+inside+`"}`)
	if a.code != http.StatusAccepted {
		t.Fatalf("data_dir %s: %d %s", inside, a.code, a.body)
	}
	etcdtest.Eventually(t, "the restore under ..foo", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(inside, "member", "snap", "db"))
		return err == nil
	})
}

// Items: bodies past the limit get 413 and run nothing; two JSON
// documents are refused; a negative revision is refused (CLI and API).
func TestRequestsAreReadWholeOrRefused(t *testing.T) {
	_, conn := secureMember(t)
	storeURL := "file://" + t.TempDir()
	p := startServe(t, conn, storeURL, "--restore-root", t.TempDir())
	uploading(t, p)
	big := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte(" "), 5<<20)), bytes.NewReader([]byte(`{"dry_run": true}`)))
	if a := apiCallBody(t, p, "POST", "/v1/defrag", big); a.code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 5 MiB body: %d %s", a.code, a.body)
	}
	if m := apiCall(t, p, "GET", "/metrics", ""); strings.Contains(m.body, `operation="defrag"`) {
		t.Fatal("a refused body ran a defrag")
	}
	if a := apiCall(t, p, "POST", "/v1/defrag", `{"dry_run": true}{"dry_run": false}`); a.code != http.StatusBadRequest || !strings.Contains(a.body, "more than one JSON document") {
		t.Fatalf("two documents: %d %s", a.code, a.body)
	}
	if a := apiCall(t, p, "POST", "/v1/restore", `{"data_dir": "/x", "revision": -5}`); a.code != http.StatusBadRequest || !strings.Contains(a.body, "positive") {
		t.Fatalf("a negative revision: %d %s", a.code, a.body)
	}
	r := etcdBackup(t, nil, "restore", "--store", storeURL, "--data-dir", filepath.Join(t.TempDir(), "d"), "--revision", "-5")
	if r.code != 2 || !strings.Contains(r.stderr, "positive") {
		t.Fatalf("restore --revision -5: exit %d %s", r.code, r.stderr)
	}
}

// Item: a Snapshotter that cannot back up is visible: /readyz says why
// and answers 503 past --max-backup-age, every failed attempt is counted,
// and it is retried; once the store is fixed, backups resume.
func TestBackupOutageIsVisible(t *testing.T) {
	ctx := t.Context()
	ahead, aheadConn := secureMember(t)
	if _, err := (etcdtest.Workload{Ops: 200, Seed: 3}).Run(ctx, ahead.Client(t)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	storeURL := "file://" + dir
	ok(t, nil, append([]string{"snapshot", "--store", storeURL}, aheadConn...)...)

	_, conn := secureMember(t)
	p := startServe(t, conn, storeURL, "--max-backup-age", "2s")
	var body struct {
		Ready  bool
		Error  string
		Backup struct {
			State       string
			LastError   string `json:"last_error"`
			Consecutive int    `json:"consecutive_failures"`
		}
	}
	// The store holds another cluster's chain: the sidecar refuses to
	// append to it, and keeps trying.
	etcdtest.Eventually(t, "/readyz reports the outage", 30*time.Second, func() bool {
		a := apiCall(t, p, "GET", "/readyz", "")
		_ = json.Unmarshal([]byte(a.body), &body)
		return a.code == http.StatusServiceUnavailable && body.Backup.State == "failing" && body.Backup.Consecutive >= 2
	})
	t.Logf("a user sees: /readyz 503 %s", body.Error)
	if !strings.Contains(body.Backup.LastError, "taken of cluster") {
		t.Fatalf("/readyz does not say why: %+v", body)
	}
	if n := metric(t, p.url+"/metrics", `etcdkit_snapshot_failures_total{kind="full"}`); n < 2 {
		t.Fatalf("failures counted: %v", n)
	}
	// The operator moves the other cluster's snapshots away: the retry
	// takes a full snapshot and /readyz is 200 again.
	if err := os.Rename(filepath.Join(dir, "v2"), filepath.Join(t.TempDir(), "v2")); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "backups resume", 60*time.Second, func() bool {
		a := apiCall(t, p, "GET", "/readyz", "")
		_ = json.Unmarshal([]byte(a.body), &body)
		return a.code == http.StatusOK && body.Backup.State == "ok"
	})
}

// clusterOf is the hex ID of the cluster c runs.
func clusterOf(t *testing.T, c *etcdtest.Cluster) string {
	t.Helper()
	resp, err := c.Client(t).Get(t.Context(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(resp.Header.ClusterId, 16)
}

// Item: each chain records its cluster; another cluster does not append
// to it, starts a new chain only when told to, and list shows whose each
// chain is. A cluster restored from a chain goes on appending to it.
func TestStoreKeepsClusterIdentity(t *testing.T) {
	ctx := t.Context()
	a, aConn := secureMember(t)
	if _, err := (etcdtest.Workload{Ops: 50, Seed: 1}).Run(ctx, a.Client(t)); err != nil {
		t.Fatal(err)
	}
	s := storeUnderTest{url: "file://" + t.TempDir()}
	ok(t, nil, append([]string{"snapshot", "--store", s.url}, aConn...)...)
	l := list(t, s)
	if len(l.Chains) != 1 || l.Chains[0].ClusterID != clusterOf(t, a) {
		t.Fatalf("list: %+v, cluster %s", l, clusterOf(t, a))
	}
	if table := ok(t, nil, "list", "--store", s.url); !strings.Contains(table, clusterOf(t, a)) {
		t.Fatalf("the table does not show the cluster:\n%s", table)
	}

	b, bConn := secureMember(t)
	if _, err := (etcdtest.Workload{Ops: 300, Seed: 2}).Run(ctx, b.Client(t)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"snapshot", "--delta"}, {"snapshot"}} {
		r := etcdBackup(t, nil, append(append(args, "--store", s.url), bConn...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "taken of cluster "+clusterOf(t, a)) || !strings.Contains(r.stderr, "--allow-new-chain") {
			t.Fatalf("%v from cluster B: exit %d\n%s", args, r.code, r.stderr)
		}
		t.Logf("a user sees: %s", strings.TrimSpace(r.stderr))
	}
	if l := list(t, s); len(l.Chains) != 1 || len(l.Chains[0].Deltas) != 0 {
		t.Fatalf("cluster B wrote to A's chain: %+v", l)
	}
	ok(t, nil, append([]string{"snapshot", "--store", s.url, "--allow-new-chain"}, bConn...)...)
	if l := list(t, s); len(l.Chains) != 2 || l.Chains[1].ClusterID != clusterOf(t, b) || l.Chains[0].ClusterID == l.Chains[1].ClusterID {
		t.Fatalf("after --allow-new-chain: %+v", l)
	}

	// A restore of B's chain is a new cluster, which continues the chain.
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	dir := filepath.Join(t.TempDir(), "restored")
	ok(t, nil, "restore", "--store", s.url, "--data-dir", dir, "--name", "r0", "--peer-urls", peer.String())
	r := etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true, Security: b.Security}, "r0", dir, peer)
	if clusterOf(t, r) == clusterOf(t, b) {
		t.Fatal("the restored member kept the cluster ID")
	}
	rConn := append([]string{"--endpoints", r.Endpoints()[0]}, connFlags(r.Security, "backup")...)
	if _, err := r.Client(t).Put(ctx, "/after-restore", "x"); err != nil {
		t.Fatal(err)
	}
	ok(t, nil, append([]string{"snapshot", "--delta", "--store", s.url}, rConn...)...)
	if l := list(t, s); len(l.Chains) != 2 || len(l.Chains[1].Deltas) != 1 || l.Chains[1].Problem != "" {
		t.Fatalf("the restored cluster's delta: %+v", l)
	}
}
