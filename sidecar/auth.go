package sidecar

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/etcdkit/etcdkit/internal/reload"
)

// tokenFile reads the bearer token from a file, again when the file
// changes, so a rotated secret takes effect without a restart.
func tokenFile(path string, log *slog.Logger) (*reload.File[string], error) {
	f := reload.New(func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("token file %s is empty", path)
		}
		return v, nil
	}, log, path)
	_, err := f.Get()
	return f, err
}

var errUnauthenticated = errors.New("unauthenticated: send Authorization: Bearer <token> or a client certificate")

// authenticate accepts a request with a verified client certificate (when
// client certificates are the API's credential) or the bearer token.
func (s *Sidecar) authenticate(r *http.Request) error {
	if s.opts.ClientCertAuth && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return nil
	}
	if s.auth == nil {
		return errUnauthenticated
	}
	want, err := s.auth.Get()
	if err != nil {
		return err
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errUnauthenticated
	}
	return nil
}
