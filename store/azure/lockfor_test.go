package azure_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/azure"
)

// immutableContainer answers a container's properties as Azure does for
// a container with version-level immutability on, which Azurite has not,
// and keeps the immutability policy each request that creates a blob
// asks (Put Blob, Put Block List, Copy Blob): Azurite accepts the headers
// and keeps nothing, so they are checked on the wire.
type immutableContainer struct {
	mu       sync.Mutex
	policies map[string]string // "Put Blob": "Locked until …"
}

func (c *immutableContainer) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	var op string
	switch {
	case req.Method != http.MethodPut:
	case header(req, "x-ms-copy-source") != "":
		op = "Copy Blob"
	case q.Get("comp") == "blocklist":
		op = "Put Block List"
	case q.Get("comp") == "":
		op = "Put Blob"
	}
	if op != "" {
		c.mu.Lock()
		c.policies[op] = header(req, "x-ms-immutability-policy-mode") + " until " + header(req, "x-ms-immutability-policy-until-date")
		c.mu.Unlock()
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && q.Get("restype") == "container" && q.Get("comp") == "" && resp.StatusCode == http.StatusOK {
		resp.Header.Set("x-ms-immutable-storage-with-versioning-enabled", "true")
	}
	return resp, err
}

// header reads a request's header as the SDK sets it: not canonicalized.
func header(req *http.Request, name string) string {
	if v := req.Header[name]; len(v) > 0 {
		return v[0]
	}
	return req.Header.Get(name)
}

// ?lock-for gives each blob the store writes, in one request, in blocks
// or by a copy, a version-level immutability policy in the mode asked; a
// container without version-level immutability is refused at open.
func TestLockFor(t *testing.T) {
	srv := emulator.Shared(t, emulator.Azure)
	createContainer(t, srv, "lockfor")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg := azure.Config{Container: "lockfor", Prefix: "p", Account: srv.Account, AccountKey: srv.Key, Endpoint: srv.Endpoint,
		Lock: store.Lock{For: time.Hour, Compliance: true}, Options: store.Options{PartSize: 1 << 10, Concurrency: 2}}
	if _, err := azure.New(ctx, cfg); !errors.Is(err, store.ErrBadURL) || !strings.Contains(err.Error(), "no version-level immutability") {
		t.Fatalf("lock-for on a container without version-level immutability: %v", err)
	}
	wire := &immutableContainer{policies: map[string]string{}}
	cfg.Options.Transport = wire
	st, err := azure.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "v2/Full-00000000-00000010-1700000000", strings.NewReader("full")); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "v2/Full-00000000-00000020-1700000100", strings.NewReader(strings.Repeat("block", 1000))); err != nil {
		t.Fatal(err)
	}
	if onServer, err := store.CopyObject(ctx, st, "v2/Full-00000000-00000010-1700000000", "v2/Full-00000000-00000010-1700000001"); err != nil || !onServer {
		t.Fatalf("copy: on the server %v, %v", onServer, err)
	}
	// Azurite keeps no policy: the blob's properties are asked, and tell
	// none.
	if until, err := store.LockedUntil(ctx, st, "v2/Full-00000000-00000010-1700000000"); err != nil || !until.IsZero() {
		t.Fatalf("LockedUntil on Azurite: %v, %v", until, err)
	}
	for _, op := range []string{"Put Blob", "Put Block List", "Copy Blob"} {
		mode, date, _ := strings.Cut(wire.policies[op], " until ")
		until, err := http.ParseTime(date)
		if mode != "Locked" || err != nil || time.Until(until) < 50*time.Minute {
			t.Errorf("%s asked the policy %q, want Locked for an hour (%v)", op, wire.policies[op], err)
		}
	}
}
