package gcs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
)

// retentionOn answers a bucket's metadata as GCS does for a bucket created
// with object retention on ("objectRetention": {"mode": "Enabled"}), which
// fake-gcs-server does not keep; everything else goes to the emulator as
// it is. It keeps the body of each rewrite: fake-gcs-server gives a copy
// none of the attributes the request names, so the copy's retention is
// checked on the wire.
type retentionOn struct {
	bucket   string
	rewrites chan []byte
}

func (r retentionOn) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/rewriteTo/") && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(b))
		select {
		case r.rewrites <- b:
		default:
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/b/"+r.bucket) || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	defer func() { _ = resp.Body.Close() }()
	var attrs map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&attrs); err != nil {
		return nil, err
	}
	attrs["objectRetention"] = map[string]string{"mode": "Enabled"}
	b, err := json.Marshal(attrs)
	if err != nil {
		return nil, err
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return resp, nil
}

// ?lock-for gives each object the store writes, copies included, an
// object retention of its own in the mode asked, which LockedUntil
// reports; a bucket without object retention is refused at open.
// fake-gcs-server keeps an uploaded object's retention but does not
// enforce it, so the refusal of a delete is TestLockRefusals's.
func TestLockFor(t *testing.T) {
	srv := emulator.Shared(t, emulator.GCS)
	createBucket(t, srv, "lockfor")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	wire := retentionOn{bucket: "lockfor", rewrites: make(chan []byte, 1)}
	url := "gs://lockfor/p?endpoint=" + srv.Endpoint + "&lock-for=1h"
	if _, err := store.Open(ctx, url); !errors.Is(err, store.ErrBadURL) || !strings.Contains(err.Error(), "no object retention") {
		t.Fatalf("lock-for on a bucket without object retention: %v", err)
	}
	if _, err := store.Open(ctx, url+"&lock-mode=forever"); !errors.Is(err, store.ErrBadURL) {
		t.Fatalf("lock-mode forever: %v", err)
	}
	st, err := store.OpenWith(ctx, url+"&lock-mode=compliance", store.Options{Transport: wire})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := storage.NewClient(ctx, option.WithEndpoint(srv.Endpoint+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	const full, copied = "v2/Full-00000000-00000010-1700000000", "v2/Full-00000000-00000010-1700000001"
	if err := st.Put(ctx, full, strings.NewReader("full")); err != nil {
		t.Fatal(err)
	}
	if onServer, err := store.CopyObject(ctx, st, full, copied); err != nil || !onServer {
		t.Fatalf("copy: on the server %v, %v", onServer, err)
	}
	a, err := cli.Bucket("lockfor").Object("p/" + full).Attrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.Retention == nil || a.Retention.Mode != "Locked" || time.Until(a.Retention.RetainUntil) < 50*time.Minute {
		t.Fatalf("retention of %s: %+v", full, a.Retention)
	}
	if until, err := store.LockedUntil(ctx, st, full); err != nil || !until.Equal(a.Retention.RetainUntil) {
		t.Fatalf("LockedUntil(%s) = %v, %v; the object says %v", full, until, err, a.Retention.RetainUntil)
	}
	var rewrite struct {
		Retention *struct {
			Mode            string    `json:"mode"`
			RetainUntilTime time.Time `json:"retainUntilTime"`
		} `json:"retention"`
	}
	select {
	case b := <-wire.rewrites:
		if err := json.Unmarshal(b, &rewrite); err != nil {
			t.Fatalf("the rewrite's body %q: %v", b, err)
		}
	default:
		t.Fatal("no rewrite was sent")
	}
	if r := rewrite.Retention; r == nil || r.Mode != "Locked" || time.Until(r.RetainUntilTime) < 50*time.Minute {
		t.Fatalf("the rewrite to %s asks no retention of an hour: %+v", copied, r)
	}
}
