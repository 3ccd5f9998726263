package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
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
	p := serveProc(t, cwd, conn, storeURL, extra...)
	p.start(t)
	return p
}

// serveProc is startServeIn's process, not started yet: its env may be
// set first.
func serveProc(t *testing.T, cwd string, conn []string, storeURL string, extra ...string) *sidecarProc {
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
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", p.logs.String())
		}
	})
	return p
}

// --enable-profiling serves Go's profiles behind the API's token.
func TestProfilingBehindTheToken(t *testing.T) {
	_, conn := secureMember(t)
	p := startServe(t, conn, "file://"+t.TempDir(), "--enable-profiling")
	etcdtest.Eventually(t, "serve answers", 30*time.Second, func() bool {
		ready, _ := p.ready()
		return ready
	})
	get := func(path, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, p.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/debug/pprof/", ""); code != http.StatusUnauthorized {
		t.Fatalf("profiles without the token: %d", code)
	}
	if code, body := get("/debug/pprof/", "tok"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("profiles with the token: %d %.200s", code, body)
	}
	if code, body := get("/debug/pprof/cmdline", "tok"); code != http.StatusOK || !strings.Contains(body, "serve") {
		t.Fatalf("the command line with the token: %d %.200s", code, body)
	}
	if code, _ := get("/v1/snapshots", "tok"); code != http.StatusOK {
		t.Fatalf("the API beside the profiles: %d", code)
	}
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
	// The uploader answers before its Snapshotter runs: until then a
	// full on demand is refused as not running, and asked again.
	var code int
	var body string
	etcdtest.Eventually(t, "a full snapshot through a fresh work dir", 30*time.Second, func() bool {
		req := apiCall(t, p, "POST", "/v1/snapshots/full", "")
		code, body = req.code, req.body
		return code != 503 || !strings.Contains(body, "not running")
	})
	if code != 200 {
		t.Fatalf("a full snapshot through a fresh work dir: %d %s", code, body)
	}
}

// apiClient bounds every API call of the tests: a sidecar that hangs
// fails the test instead of stalling it.
var apiClient = &http.Client{Timeout: 30 * time.Second}

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
	resp, err := apiClient.Do(req)
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
	t.Parallel()
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
	t.Parallel()
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

// Item: exit codes come from error types. A failure whose message reads
// like a usage error is 1; cobra's own command-line errors are 2.
func TestExitCodesFromTypes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"list", "--nope"}, 2, "unknown flag: --nope"},
		{[]string{"list", "-z"}, 2, "unknown shorthand flag"},
		{[]string{"list", "extra"}, 2, `unknown command "extra"`},
		{[]string{"list", "--store"}, 2, "flag needs an argument"},
		{[]string{"restore", "--revision", "abc"}, 2, `invalid argument "abc"`},
		{[]string{"list", "--store", "s4://b/p"}, 2, `unknown scheme "s4"`},
		// A runtime failure that says "invalid argument" stays a failure.
		{[]string{"restore", "--store", "file://" + t.TempDir(), "--data-dir", filepath.Join(t.TempDir(), "d")}, 1, "no full snapshot"},
	} {
		r := etcdBackup(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "panic") {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", tc.args, r.code, tc.code, tc.want, r.stderr)
		}
	}
}

// Item: one config file serves serve and the operator commands; ETCDKIT_
// variables are checked; a list for a one-value flag is refused.
func TestConfigAcrossCommands(t *testing.T) {
	st := "file://" + t.TempDir()
	cfg := filepath.Join(t.TempDir(), "sidecar.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("store: " + st + "\nlisten: 127.0.0.1:0\ntoken-file: /x\ndelta-period: 5s\nrestore-root: /var/lib\nendpoints: [http://127.0.0.1:1, http://127.0.0.1:2]\n")
	if out := ok(t, nil, "list", "--config", cfg); !strings.Contains(out, "CHAIN") {
		t.Fatalf("list with serve's config:\n%s", out)
	}
	if out := ok(t, []string{"ETCDKIT_CONFIG=" + cfg}, "list"); !strings.Contains(out, "CHAIN") {
		t.Fatalf("list with ETCDKIT_CONFIG:\n%s", out)
	}
	write("store: " + st + "\nlisten: 127.0.0.1:0\nlisten-addr: x\n")
	if r := etcdBackup(t, nil, "list", "--config", cfg); r.code != 2 || !strings.Contains(r.stderr, `config key "listen-addr" is not a flag of etcd-backup`) {
		t.Fatalf("an unknown key: exit %d %s", r.code, r.stderr)
	}
	write("store: [" + st + ", file:///other]\n")
	if r := etcdBackup(t, nil, "list", "--config", cfg); r.code != 2 || !strings.Contains(r.stderr, "a list, but --store takes one value") {
		t.Fatalf("a list for --store: exit %d %s", r.code, r.stderr)
	}
	if r := etcdBackup(t, []string{"ETCDKIT_STROE=" + st}, "list", "--store", st); r.code != 2 || !strings.Contains(r.stderr, "ETCDKIT_STROE is not a flag") {
		t.Fatalf("a misspelled variable: exit %d %s", r.code, r.stderr)
	}
	// A variable of another command is not this one's business.
	if out := ok(t, []string{"ETCDKIT_DELTA_PERIOD=5s"}, "list", "--store", st); !strings.Contains(out, "CHAIN") {
		t.Fatalf("list with serve's variable:\n%s", out)
	}
}

// Items: flags out of range are refused with the range; --peers must be
// URLs.
func TestFlagRanges(t *testing.T) {
	st := "file://" + t.TempDir()
	serve := []string{"serve", "--store", st, "--token-file", "/x", "--listen", "127.0.0.1:0"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(serve, "--delta-period", "-1s"), "--delta-period -1s: 0 (off) or more"},
		{append(serve, "--gc-period", "-5m"), "--gc-period -5m0s: 0 (off) or more"},
		{append(serve, "--follow-interval", "0s"), "--follow-interval 0s: more than 0"},
		{append(serve, "--delta-memory-limit", "0"), "--delta-memory-limit 0: 1 or more"},
		{append(serve, "--peers", "m1=etcd-1:8080"), `--peers m1 "etcd-1:8080": not a URL`},
		{[]string{"gc", "--store", st, "--retention-policy", "limit-based", "--max-fulls", "0"}, "--max-fulls 0: 1 or more"},
		{[]string{"list", "--store", st, "--command-timeout", "-1s"}, "--command-timeout -1s: more than 0"},
		{[]string{"restore", "--store", st, "--data-dir", "/tmp/x", "--keep-moved-aside", "-2"}, "--keep-moved-aside -2: -1 or more"},
	} {
		r := etcdBackup(t, nil, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", tc.args[len(tc.args)-2:], r.code, tc.want, r.stderr)
		}
	}
}

// Items: version and build info; list of a path that does not exist; a
// chain with a problem makes list exit non-zero.
func TestVersionAndList(t *testing.T) {
	out := ok(t, nil, "version")
	if !strings.Contains(out, "etcd-backup ") || !strings.Contains(out, "go go1.") || !strings.Contains(out, "etcd v3.") {
		t.Fatalf("version:\n%s", out)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(ok(t, nil, "version", "-o", "json")), &v); err != nil || !strings.HasPrefix(v["etcd_version"], "v3.") {
		t.Fatalf("version -o json: %v %v", v, err)
	}
	_, conn := secureMember(t)
	p := startServe(t, conn, "file://"+t.TempDir())
	uploading(t, p)
	m := apiCall(t, p, "GET", "/metrics", "").body
	for _, series := range []string{`etcdkit_build_info{commit="",etcd_version="v3.`, "go_goroutines ", "process_resident_memory_bytes "} {
		if !strings.Contains(m, series) {
			t.Errorf("/metrics has no %s", series)
		}
	}

	missing := filepath.Join(t.TempDir(), "typo")
	r := etcdBackup(t, nil, "list", "--store", "file://"+missing)
	if r.code != 1 || !strings.Contains(r.stderr, "the directory does not exist") {
		t.Fatalf("list of a missing path: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("list created %s: %v", missing, err)
	}
	t.Logf("a user sees: %s", strings.TrimSpace(r.stderr))

	dir := t.TempDir()
	stURL := "file://" + dir
	ok(t, nil, append([]string{"snapshot", "--store", stURL}, conn...)...)
	// A delta whose full is gone: the chain cannot be restored whole.
	if err := os.WriteFile(filepath.Join(dir, "v2", "Incr-00009000-00009010-1796000000"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = etcdBackup(t, nil, "list", "--store", stURL)
	if r.code != 1 || !strings.Contains(r.stdout, "!") || !strings.Contains(r.stderr, "cannot be restored whole") {
		t.Fatalf("list with a problem row: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Items: one JSON style (snake_case keys, hex member IDs, seconds);
// compact twice and of a chain without deltas does nothing and says so;
// moved-aside data dirs are pruned to --keep-moved-aside.
func TestJSONCompactAndPrune(t *testing.T) {
	t.Parallel()
	c, conn := secureMember(t)
	s := storeUnderTest{url: "file://" + t.TempDir()}
	base := append([]string{"--store", s.url}, conn...)
	ok(t, nil, append([]string{"snapshot"}, base...)...)
	compactOnce := func() map[string]any {
		t.Helper()
		var out map[string]any
		if err := json.Unmarshal([]byte(ok(t, nil, "compact", "--store", s.url, "-o", "json")), &out); err != nil {
			t.Fatal(err)
		}
		snakeCase(t, "compact", out)
		return out
	}
	if out := compactOnce(); out["unchanged"] != true {
		t.Fatalf("compact of a chain without deltas: %v", out)
	}
	if table := ok(t, nil, "compact", "--store", s.url); !strings.Contains(table, "nothing to compact") {
		t.Fatalf("compact's table: %s", table)
	}
	if _, err := c.Client(t).Put(t.Context(), "/more", "x"); err != nil {
		t.Fatal(err)
	}
	ok(t, nil, append([]string{"snapshot", "--delta"}, base...)...)
	if out := compactOnce(); out["unchanged"] != false {
		t.Fatalf("compact of a chain with a delta: %v", out)
	}
	if out := compactOnce(); out["unchanged"] != true {
		t.Fatalf("compact twice: %v", out)
	}
	if l := list(t, s); len(l.Chains) != 2 {
		t.Fatalf("two compactions in a row wrote two fulls: %+v", l)
	}

	var d map[string]any
	if err := json.Unmarshal([]byte(ok(t, nil, append([]string{"defrag", "--dry-run", "-o", "json"}, conn...)...)), &d); err != nil {
		t.Fatal(err)
	}
	snakeCase(t, "defrag", d)
	id := d["members"].([]any)[0].(map[string]any)["id"].(string)
	status, err := c.Client(t).Status(t.Context(), c.Endpoints()[0])
	if err != nil || id != strconv.FormatUint(status.Header.MemberId, 16) {
		t.Fatalf("defrag's member id %q, the member's %x (%v)", id, status.Header.MemberId, err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(ok(t, nil, append([]string{"verify", "--store", s.url, "--against", c.Endpoints()[0], "-o", "json"}, conn[2:]...)...)), &v); err != nil {
		t.Fatal(err)
	}
	snakeCase(t, "verify", v)
	p := startServe(t, conn, s.url)
	uploading(t, p)
	a := apiCall(t, p, "POST", "/v1/defrag", `{"dry_run": true}`)
	var api map[string]any
	if err := json.Unmarshal([]byte(a.body), &api); err != nil || a.code != 200 {
		t.Fatalf("POST /v1/defrag: %d %s", a.code, a.body)
	}
	snakeCase(t, "POST /v1/defrag", api)

	// Three restores into one data dir: the default keeps the newest
	// moved-aside dir; --keep-moved-aside 2 keeps two.
	dataDir := filepath.Join(t.TempDir(), "data")
	for range 3 {
		ok(t, nil, "restore", "--store", s.url, "--data-dir", dataDir)
		time.Sleep(1100 * time.Millisecond) // names are to the second
	}
	if aside, _ := filepath.Glob(dataDir + ".bak-*"); len(aside) != 1 {
		t.Fatalf("moved aside after three restores: %v", aside)
	}
	ok(t, nil, "restore", "--store", s.url, "--data-dir", dataDir, "--keep-moved-aside", "2")
	if aside, _ := filepath.Glob(dataDir + ".bak-*"); len(aside) != 2 {
		t.Fatalf("moved aside with --keep-moved-aside 2: %v", aside)
	}
}

var snakeKey = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// snakeCase fails on any key of v, at any depth, that is not snake_case.
func snakeCase(t *testing.T, what string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if !snakeKey.MatchString(k) {
				t.Errorf("%s: key %q is not snake_case", what, k)
			}
			snakeCase(t, what, e)
		}
	case []any:
		for _, e := range v {
			snakeCase(t, what, e)
		}
	}
}

// Item: no command waits forever on a member or a store that does not
// answer; the error names what did not answer.
func TestCommandsHaveDeadlines(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Silent(t)
	_, conn := secureMember(t)
	st := "file://" + t.TempDir()
	ok(t, nil, append([]string{"snapshot", "--store", st}, conn...)...)
	env := []string{"AWS_ACCESS_KEY_ID=a", "AWS_SECRET_ACCESS_KEY=b", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}
	fast := []string{"--dial-timeout", "1s", "--command-timeout", "2s"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--store", "s3://b/p?endpoint=http://" + addr + "&path-style=true&region=us-east-1", "--store-timeout", "2s"}, "no answer within 2s"},
		{append([]string{"snapshot", "--store", st, "--endpoints", "http://" + addr}, fast...), "etcd http://" + addr + ": ask whether authentication is on: no answer within the request timeout of 2s"},
		{append([]string{"defrag", "--endpoints", "http://" + addr}, fast...), "etcd http://" + addr},
		{append([]string{"verify", "--store", st, "--against", "http://127.0.0.1:1"}, fast...), "etcd http://127.0.0.1:1"},
	} {
		start := time.Now()
		r := etcdBackup(t, env, tc.args...)
		took := time.Since(start)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) || took > 20*time.Second {
			t.Errorf("%s: exit %d after %s, want 1 and %q:\n%s", tc.args[0], r.code, took.Round(time.Millisecond), tc.want, r.stderr)
		}
		t.Logf("%s, after %s, a user sees: %s", tc.args[0], took.Round(100*time.Millisecond), strings.TrimSpace(r.stderr))
	}
}

// Item: compact without --compression keeps the chain's codec: a zstd
// chain becomes a zstd full, not an uncompressed one.
func TestCompactKeepsTheChainsCodec(t *testing.T) {
	c, conn := secureMember(t)
	storeURL := "file://" + t.TempDir()
	ok(t, nil, append([]string{"snapshot", "--store", storeURL, "--compression", "zstd"}, conn...)...)
	writes(t, c.Client(t), 30, "codec")
	ok(t, nil, append([]string{"snapshot", "--delta", "--store", storeURL, "--compression", "zstd"}, conn...)...)
	out := ok(t, nil, "compact", "--store", storeURL, "--work-dir", t.TempDir(), "-o", "json")
	var c2 struct{ Snapshot string }
	if err := json.Unmarshal([]byte(out), &c2); err != nil || !strings.HasSuffix(c2.Snapshot, ".zst") {
		t.Fatalf("compact of a zstd chain wrote %q (%v)", c2.Snapshot, err)
	}
}

// Item: what a snapshot killed mid-write leaves in a file:// store (a
// staged file in its root, a temporary file beside the objects) is swept
// by gc once its writer is gone, whatever else runs there.
func TestGCSweepsWhatKilledWritersLeft(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "v2"), 0o700); err != nil {
		t.Fatal(err)
	}
	left := []string{filepath.Join(dir, ".etcdkit-tmp-1"), filepath.Join(dir, "v2", ".etcdkit-tmp-2")}
	old := time.Now().Add(-time.Hour)
	for _, p := range left {
		if err := os.WriteFile(p, []byte("half a snapshot"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, nil, "gc", "--store", "file://"+dir)
	for _, p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after gc: %v", p, err)
		}
	}
}

// Item: a truncated or bit-flipped object passes list, which reads names
// and sizes only (and says so); list --check reads every object through
// its checksum, marks the chain and exits 1.
func TestListCheckFindsDamage(t *testing.T) {
	c, conn := secureMember(t)
	dir := t.TempDir()
	storeURL := "file://" + dir
	ok(t, nil, append([]string{"snapshot", "--store", storeURL, "--compression", "gzip"}, conn...)...)
	writes(t, c.Client(t), 30, "check")
	ok(t, nil, append([]string{"snapshot", "--delta", "--store", storeURL}, conn...)...)
	ok(t, nil, "list", "--store", storeURL, "--check")
	deltas, _ := filepath.Glob(filepath.Join(dir, "v2", "Incr-*"))
	if len(deltas) != 1 {
		t.Fatalf("deltas: %v", deltas)
	}
	b, err := os.ReadFile(deltas[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(deltas[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, nil, "list", "--store", storeURL)
	r := etcdBackup(t, nil, "list", "--store", storeURL, "--check")
	if r.code != 1 || !strings.Contains(r.stdout, "!") || !strings.Contains(r.stdout, filepath.Base(deltas[0])) || !strings.Contains(r.stderr, "cannot be restored whole") {
		t.Fatalf("list --check of a bit-flipped delta: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("a user sees:\n%s%s", r.stdout, r.stderr)

	// A full whose name says a later revision than its database holds,
	// its checksum sound: a restore refuses it, and so does list --check.
	fulls, _ := filepath.Glob(filepath.Join(dir, "v2", "Full-*"))
	if err := os.Remove(deltas[0]); err != nil || len(fulls) != 1 {
		t.Fatalf("fulls %v: %v", fulls, err)
	}
	full, err := os.ReadFile(fulls[0])
	if err != nil {
		t.Fatal(err)
	}
	misnamed := filepath.Join(dir, "v2", "Full-00000000-99999999-"+strings.TrimSuffix(filepath.Base(fulls[0])[len("Full-00000000-00000000-"):], ".gz")+".gz")
	if err := os.WriteFile(misnamed, full, 0o600); err != nil {
		t.Fatal(err)
	}
	r = etcdBackup(t, nil, "list", "--store", storeURL, "--check")
	if r.code != 1 || !strings.Contains(r.stdout, "its name says 99999999") {
		t.Fatalf("list --check of a misnamed full: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// Item: an object named by a clock ahead of this one's shows so, not as
// a negative age.
func TestAgeAheadOfTheClock(t *testing.T) {
	for d, want := range map[time.Duration]string{90 * time.Second: "1m", -90 * time.Second: "in 1m (clock ahead)", -500 * time.Millisecond: "0s"} {
		if got := age(d); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
}
