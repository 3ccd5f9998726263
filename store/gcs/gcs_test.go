package gcs_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/gcs"
	"github.com/etcdkit/etcdkit/store/storetest"
)

var testOptions = store.Options{PartSize: 5 << 20, Concurrency: 3}

func createBucket(t *testing.T, srv *emulator.Server, bucket string) {
	t.Helper()
	ctx := context.Background()
	cli, err := storage.NewClient(ctx, option.WithEndpoint(srv.Endpoint+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	if err := cli.Bucket(bucket).Create(ctx, "etcdkit-test", nil); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// A resumable upload sends each chunk to the session URL with the range it
// carries.
func isPartUpload(r *http.Request) bool {
	return r.URL.Query().Has("upload_id") && r.Header.Get("Content-Range") != ""
}

func TestConformance(t *testing.T) {
	srv := emulator.Shared(t, emulator.GCS)
	createBucket(t, srv, "conformance")
	wire := &storetest.Wire{IsPartUpload: isPartUpload}
	opts := testOptions
	opts.Transport = wire
	cfg := func(bucket, prefix string) gcs.Config {
		return gcs.Config{Bucket: bucket, Prefix: prefix, Endpoint: srv.Endpoint, Options: opts}
	}
	storetest.Run(t, storetest.Harness{
		Options: opts,
		Wire:    wire,
		Open: func(t *testing.T, prefix string) store.Store {
			st, err := gcs.New(context.Background(), cfg("conformance", prefix))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		// fake-gcs-server accepts any token, so the refused credentials
		// here are a key file that cannot be used.
		BadCredentials: func(t *testing.T) (store.Store, error) {
			p := filepath.Join(t.TempDir(), "key.json")
			if err := os.WriteFile(p, []byte(`{"type":"service_account","private_key":"not a key"}`), 0o600); err != nil {
				t.Fatal(err)
			}
			c := cfg("conformance", "bad")
			c.CredentialsFile = p
			return store.Opened(gcs.New(context.Background(), c))
		},
		MissingBucket: func(t *testing.T) (store.Store, error) {
			return store.Opened(gcs.New(context.Background(), cfg("no-such-bucket", "")))
		},
	})
}

// TestOpenFromURL opens a store the way a deployment does, from a URL, with
// etcd-backup-restore's endpoint file beside the credentials.
func TestOpenFromURL(t *testing.T) {
	srv := emulator.Shared(t, emulator.GCS)
	createBucket(t, srv, "url")
	ctx := context.Background()
	t.Run("endpoint-option", func(t *testing.T) {
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
		storetest.UseURL(t, "gs://url/opt?endpoint="+srv.Endpoint)
	})
	t.Run("environment-endpoint", func(t *testing.T) {
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
		t.Setenv("GOOGLE_STORAGE_API_ENDPOINT", srv.Endpoint)
		storetest.UseURL(t, "gs://url/env")
	})
	t.Run("unknown-option", func(t *testing.T) {
		if _, err := store.Open(ctx, "gs://url/x?endpiont=http://x"); err == nil || !strings.Contains(err.Error(), "endpiont") {
			t.Fatalf("open: %v", err)
		}
	})
	t.Run("unusable-credentials-file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "serviceaccount.json")
		if err := os.WriteFile(p, []byte(`{"type":"service_account","private_key":"not a key"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Dir(p)) // a directory, as etcd-backup-restore mounts it
		_, err := store.Open(ctx, "gs://url/x?endpoint="+srv.Endpoint)
		if !errors.Is(err, store.ErrAccessDenied) || !strings.Contains(err.Error(), p) {
			t.Fatalf("open: %v, want access denied naming %s", err, p)
		}
	})
	t.Run("absent-credentials-file", func(t *testing.T) {
		// etcd-druid sets the variable where no secret is mounted
		// (workload identity): no error, the default credentials.
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "absent.json"))
		storetest.UseURL(t, "gs://url/absent?endpoint="+srv.Endpoint)
	})
	t.Run("external-account", func(t *testing.T) {
		// Workload identity federation: the subject token is exchanged at
		// the token endpoint, and the store's calls carry what it gave.
		exchanged := make(chan string, 100)
		sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err != nil || r.Form.Get("subject_token") == "" {
				http.Error(w, "no subject token", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"exchanged-%s","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":3600}`,
				r.Form.Get("subject_token"))
		}))
		defer sts.Close()
		dir := t.TempDir()
		subject := filepath.Join(dir, "token")
		if err := os.WriteFile(subject, []byte("pod-identity"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "credentials.json")
		if err := os.WriteFile(p, []byte(fmt.Sprintf(`{"type":"external_account","audience":"//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k",
"subject_token_type":"urn:ietf:params:oauth:token-type:jwt","token_url":%q,"credential_source":{"file":%q}}`, sts.URL, subject)), 0o600); err != nil {
			t.Fatal(err)
		}
		seen := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			select {
			case exchanged <- r.Header.Get("Authorization"):
			default:
			}
			return http.DefaultTransport.RoundTrip(r)
		})
		st, err := gcs.New(ctx, gcs.Config{Bucket: "url", Prefix: "external", Endpoint: srv.Endpoint, CredentialsFile: p,
			Options: store.Options{Transport: seen}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.List(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if got := <-exchanged; got != "Bearer exchanged-pod-identity" {
			t.Fatalf("the store's call carried %q", got)
		}
		// The configuration rotates (a new file behind the path, naming
		// another subject token): the open store's next call carries the
		// token exchanged for it.
		other := filepath.Join(dir, "token-2")
		if err := os.WriteFile(other, []byte("rotated-identity"), 0o600); err != nil {
			t.Fatal(err)
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf(`{"type":"external_account","audience":"//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k",
"subject_token_type":"urn:ietf:params:oauth:token-type:jwt","token_url":%q,"credential_source":{"file":%q}}`, sts.URL, other)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
		for len(exchanged) > 0 {
			<-exchanged
		}
		if _, err := st.List(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if got := <-exchanged; got != "Bearer exchanged-rotated-identity" {
			t.Fatalf("after the rotation the store's call carried %q", got)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An object whose custom metadata says x-etcd-snapshot-exclude=true is not
// listed, as etcd-backup-restore reads a GCS bucket.
func TestExcludeTag(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := emulator.Shared(t, emulator.GCS)
	createBucket(t, srv, "exclude")
	st, err := gcs.New(ctx, gcs.Config{Bucket: "exclude", Prefix: "etcd", Endpoint: srv.Endpoint, Options: testOptions})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"v2/Full-00000000-00000010-1700000000", "v2/Full-00000000-00000020-1700000100"} {
		if err := st.Put(ctx, key, strings.NewReader("full")); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := storage.NewClient(ctx, option.WithEndpoint(srv.Endpoint+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.Bucket("exclude").Object("etcd/v2/Full-00000000-00000020-1700000100").Update(ctx,
		storage.ObjectAttrsToUpdate{Metadata: map[string]string{store.ExcludeTag: "true"}}); err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "v2/")
	if err != nil || len(objs) != 1 || objs[0].Key != "v2/Full-00000000-00000010-1700000000" {
		t.Fatalf("listed %+v, %v; want the untagged full alone", objs, err)
	}
	// What the listing leaves out can be told, through a view too.
	view, err := store.WithPrefix(st, "v2")
	if err != nil {
		t.Fatal(err)
	}
	out, err := store.ListExcluded(ctx, view, "Full-")
	if err != nil || len(out) != 1 || out[0].Key != "Full-00000000-00000020-1700000100" || out[0].Size != 4 {
		t.Fatalf("excluded %+v, %v; want the tagged full", out, err)
	}
}
