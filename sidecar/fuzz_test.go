package sidecar

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/etcdkit/etcdkit/sidecar/api"
)

// The API decodes bodies from the network: any bytes are a request or a
// bad request (400, or 413 past the size limit), never a panic or another
// error.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"data_dir": "/var/lib/etcd/data", "name": "m0", "peer_urls": ["http://m0:2380"], "if_needed": true}`,
		`{"data_dir": "/d", "revision": 42}`, `{"data_dir": "/d", "time": "2026-11-29T10:00:00Z"}`,
		`{"dry_run": true}`, `{`, `{"unknown": 1}`, `[]`, `null`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var restore api.RestoreRequest
		err := decode(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/restore", bytes.NewReader(body)), &restore)
		if err != nil && !errors.Is(err, errBadRequest) && !errors.Is(err, errTooLarge) {
			t.Fatalf("%q: %v is not a bad request", body, err)
		}
		var defrag struct {
			DryRun bool `json:"dry_run"`
		}
		err = decode(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/defrag", bytes.NewReader(body)), &defrag)
		if err != nil && !errors.Is(err, errBadRequest) && !errors.Is(err, errTooLarge) {
			t.Fatalf("%q: %v is not a bad request", body, err)
		}
	})
}
