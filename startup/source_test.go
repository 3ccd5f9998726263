package startup_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/startup"
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
	cfg := startup.Config{Name: "m0", DataDir: "/etc", PeerURLs: []string{"http://m0:2380"}}
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
