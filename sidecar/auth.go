package sidecar

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// tokenFile is a bearer token kept in a file, read again when the file
// changes, so a rotated secret takes effect without a restart.
type tokenFile struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	value   string
}

func (t *tokenFile) token() (string, error) {
	info, err := os.Stat(t.path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.value != "" && info.ModTime().Equal(t.modTime) && info.Size() == t.size {
		return t.value, nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("token file %s is empty", t.path)
	}
	t.value, t.modTime, t.size = v, info.ModTime(), info.Size()
	return v, nil
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
	want, err := s.auth.token()
	if err != nil {
		return err
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errUnauthenticated
	}
	return nil
}
