package sidecar_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar/api"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/validate"
)

var memberFollow = member.FollowOptions{Interval: 100 * time.Millisecond}

func TestAPI(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	s := newSetup(t)
	// Deltas on demand only: a periodic one took the events an on-demand
	// delta below was to write (409, no events) on a loaded machine.
	s.deltaPeriod = time.Hour
	r := s.start(t, c, c.Members[0])
	base := r.srv.URL
	etcdtest.Eventually(t, "the sidecar uploads", 10*time.Second, r.sc.Uploader)

	// Open endpoints, and credentials on the rest.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := call(t, "GET", base+p, "", "", nil); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d", p, code)
		}
	}
	for _, tok := range []string{"", "wrong"} {
		var e map[string]string
		if code, h := call(t, "GET", base+"/v1/snapshots", tok, "", &e); code != http.StatusUnauthorized || e["error"] == "" || h.Get("WWW-Authenticate") == "" {
			t.Errorf("token %q: %d %v", tok, code, e)
		}
	}

	// Snapshots on demand, then the chain view.
	put(t, cli, 50, "/api/")
	var full api.SnapshotView
	if code, _ := call(t, "POST", base+"/v1/snapshots/full", token, "", &full); code != http.StatusOK || full.Kind != "Full" || full.LastRevision == 0 {
		t.Fatalf("full: %d %+v", code, full)
	}
	put(t, cli, 20, "/api2/")
	var delta api.SnapshotView
	if code, _ := call(t, "POST", base+"/v1/snapshots/delta", token, "", &delta); code != http.StatusOK || delta.Kind != "Incr" || delta.LastRevision <= full.LastRevision {
		t.Fatalf("delta: %d %+v", code, delta)
	}
	// The same through the Go client.
	client := &api.Client{URL: base, Token: token}
	if f, err := client.Full(context.Background()); err != nil || f.Kind != "Full" || f.LastRevision < delta.LastRevision {
		t.Fatalf("Client.Full: %+v %v", f, err)
	}
	put(t, cli, 5, "/api3/")
	if d, err := client.Delta(context.Background()); err != nil || d.Kind != "Incr" || d.LastRevision <= delta.LastRevision {
		t.Fatalf("Client.Delta: %+v %v", d, err)
	}
	if _, err := (&api.Client{URL: base, Token: "wrong"}).Full(context.Background()); err == nil {
		t.Fatal("Client.Full with a wrong token succeeded")
	}
	var list struct{ Chains []api.ChainView }
	if code, _ := call(t, "GET", base+"/v1/snapshots", token, "", &list); code != http.StatusOK || len(list.Chains) == 0 {
		t.Fatalf("list: %d %+v", code, list)
	}
	var latest struct {
		Chain        api.ChainView
		LastRevision int64 `json:"last_revision"`
		Problem      string
	}
	if code, _ := call(t, "GET", base+"/v1/snapshots/latest", token, "", &latest); code != http.StatusOK || latest.LastRevision < delta.LastRevision || latest.Problem != "" {
		t.Fatalf("latest: %d %+v", code, latest)
	}

	// Wrong methods and bad bodies.
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/snapshots/full", ""}, {"DELETE", "/v1/snapshots", ""}, {"POST", "/healthz", ""},
		{"GET", "/v1/defrag", ""}, {"PUT", "/v1/restore", ""}, {"POST", "/v1/restore/abc", ""},
	} {
		var e map[string]string
		if code, h := call(t, tc.method, base+tc.path, token, tc.body, &e); code != http.StatusMethodNotAllowed || h.Get("Allow") == "" || e["error"] == "" {
			t.Errorf("%s %s: %d, Allow %q, %v", tc.method, tc.path, code, h.Get("Allow"), e)
		}
	}
	for _, body := range []string{"{", `{"dry_run": "yes"}`, `{"unknown": 1}`} {
		var e map[string]string
		if code, _ := call(t, "POST", base+"/v1/defrag", token, body, &e); code != http.StatusBadRequest || e["error"] == "" {
			t.Errorf("defrag with %s: %d %v", body, code, e)
		}
	}
	if code, _ := call(t, "POST", base+"/v1/restore", token, `{"data_dir": 3}`, nil); code != http.StatusBadRequest {
		t.Errorf("restore with a bad body: %d", code)
	}

	// Defragmentation and compaction of the chain.
	var d struct {
		Members []struct{ Name, Skipped string }
		DryRun  bool `json:"dry_run"`
	}
	if code, _ := call(t, "POST", base+"/v1/defrag", token, `{"dry_run": true}`, &d); code != http.StatusOK || !d.DryRun || len(d.Members) != 1 {
		t.Fatalf("defrag: %d %+v", code, d)
	}
	var comp struct {
		Snapshot  api.SnapshotView
		Revisions int64
	}
	if code, _ := call(t, "POST", base+"/v1/compact", token, "", &comp); code != http.StatusOK || comp.Snapshot.Kind != "Full" || comp.Snapshot.LastRevision < delta.LastRevision {
		t.Fatalf("compact: %d %+v", code, comp)
	}

	// A restore outside the root is refused; inside, it runs as a job whose
	// status stays put however often it is read.
	if code, _ := call(t, "POST", base+"/v1/restore", token, `{"data_dir": "/etc/x"}`, nil); code != http.StatusForbidden {
		t.Errorf("restore outside the root: %d", code)
	}
	dir := filepath.Join(s.root, "m0")
	var started struct{ ID string }
	if code, _ := call(t, "POST", base+"/v1/restore", token, `{"data_dir": "`+dir+`", "name": "m0", "peer_urls": ["http://127.0.0.1:2380"]}`, &started); code != http.StatusAccepted || started.ID == "" {
		t.Fatalf("restore: %d %+v", code, started)
	}
	var job api.Job
	etcdtest.Eventually(t, "the restore job ends", 60*time.Second, func() bool {
		call(t, "GET", base+"/v1/restore/"+started.ID, token, "", &job)
		return job.State != api.JobRunning
	})
	for range 3 {
		var again api.Job
		call(t, "GET", base+"/v1/restore/"+started.ID, token, "", &again)
		if again.State != api.JobSucceeded || again.Action != "restored" || again.Revision != job.Revision || again.Revision < delta.LastRevision {
			t.Fatalf("restore job read again: %+v (first %+v)", again, job)
		}
	}
	// A restore job bumps the revision past what the store holds, unless
	// asked to keep it.
	rep, err := validate.DataDir(context.Background(), dir, validate.Options{Mode: validate.Full})
	if err != nil || rep.Verdict != validate.Valid || job.RevisionBump < restore.MinSafeBump || rep.Revision != job.Revision+int64(job.RevisionBump) {
		t.Fatalf("restored data dir: %+v %v; job %+v", rep, err, job)
	}
	first := job
	// If needed: the restored dir is fit, nothing is done.
	call(t, "POST", base+"/v1/restore", token, `{"data_dir": "`+dir+`", "name": "m0", "if_needed": true}`, &started)
	etcdtest.Eventually(t, "the second job ends", 30*time.Second, func() bool {
		call(t, "GET", base+"/v1/restore/"+started.ID, token, "", &job)
		return job.State != api.JobRunning
	})
	if job.State != api.JobSucceeded || job.Action != "none" || job.Verdict != "Valid" {
		t.Fatalf("restore if needed of a sound dir: %+v", job)
	}
	// The facts a caller's start-up decides from.
	var v api.Validation
	if code, body := call(t, "POST", base+"/v1/validate", token, `{"data_dir": "`+dir+`", "name": "m0"}`, &v); code != http.StatusOK ||
		v.Verdict != "Valid" || !v.Backups || v.BackupRevision != first.Revision || v.Revision != first.Revision+int64(first.RevisionBump) {
		t.Fatalf("validate a restored data dir: %d %s", code, body)
	}
	if code, body := call(t, "POST", base+"/v1/validate", token, `{"data_dir": "/elsewhere"}`, nil); code != http.StatusForbidden {
		t.Fatalf("validate outside the restore root: %d %s", code, body)
	}
	if code, _ := call(t, "GET", base+"/v1/restore/nope", token, "", nil); code != http.StatusNotFound {
		t.Errorf("unknown job: %d", code)
	}

	// The token file is read again when it changes.
	if err := os.WriteFile(s.tokenFile, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	_ = os.Chtimes(s.tokenFile, later, later)
	if code, _ := call(t, "GET", base+"/v1/snapshots", token, "", nil); code != http.StatusUnauthorized {
		t.Errorf("old token after rotation: %d", code)
	}
	if code, _ := call(t, "GET", base+"/v1/snapshots", "rotated", "", nil); code != http.StatusOK {
		t.Errorf("new token after rotation: %d", code)
	}

	// Metrics carry the names dashboards use, with sane values.
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	text := string(b)
	value := func(series string) float64 {
		m := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(series) + " (\\S+)$").FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("metric %s missing from:\n%s", series, text)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	for _, m := range []struct {
		series string
		ok     func(float64) bool
	}{
		{`etcdkit_uploader`, func(v float64) bool { return v == 1 }},
		{`etcdkit_snapshot_last_revision{kind="full"}`, func(v float64) bool { return v >= float64(full.LastRevision) }},
		{`etcdkit_snapshot_last_revision{kind="delta"}`, func(v float64) bool { return v >= float64(delta.LastRevision) }},
		{`etcdkit_snapshot_size_bytes{kind="full"}`, func(v float64) bool { return v > 0 }},
		{`etcdkit_snapshot_duration_seconds_count{kind="full"}`, func(v float64) bool { return v >= 1 }},
		{`etcdkit_snapshot_last_success_timestamp_seconds{kind="full"}`, func(v float64) bool { return v > float64(time.Now().Add(-time.Hour).Unix()) }},
		{`etcdkit_snapshot_failures_total{kind="full"}`, func(v float64) bool { return v == 0 }},
		{`etcdkit_chain_deltas`, func(v float64) bool { return v >= 0 }},
		{`etcdkit_chain_revisions`, func(v float64) bool { return v >= 0 }},
		{`etcdkit_delta_pending_events`, func(v float64) bool { return v >= 0 }},
		{`etcdkit_operation_duration_seconds_count{operation="restore"}`, func(v float64) bool { return v == 1 }},
		{`etcdkit_operation_duration_seconds_count{operation="validation"}`, func(v float64) bool { return v == 2 }}, // if_needed and /v1/validate
		{`etcdkit_operation_duration_seconds_count{operation="defrag"}`, func(v float64) bool { return v == 1 }},
		{`etcdkit_operation_duration_seconds_count{operation="compaction"}`, func(v float64) bool { return v == 1 }},
	} {
		if v := value(m.series); !m.ok(v) {
			t.Errorf("%s = %v", m.series, v)
		}
	}
}
