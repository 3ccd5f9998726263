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

// Auth is the API's credential. It is required where the API is mounted
// (Handler, Serve), not by New: a sidecar embedded in a process that
// serves no API needs none.
type Auth struct {
	// TokenFile holds the bearer token the API requires; it is read
	// again when it changes, so a rotated secret takes effect without a
	// restart.
	TokenFile string
	// ClientCerts accepts any request that carries a client certificate
	// the server's TLS configuration verified.
	ClientCerts bool
}

// Check says whether the credential can be used: one is given, and the
// token file reads.
func (a Auth) Check() error {
	_, err := a.authenticator(nil)
	return err
}

// authenticator checks requests against a.
func (a Auth) authenticator(log *slog.Logger) (*authenticator, error) {
	if a.TokenFile == "" && !a.ClientCerts {
		return nil, errors.New("sidecar: the API needs a token file or client certificates (mTLS)")
	}
	au := &authenticator{clientCerts: a.ClientCerts}
	if a.TokenFile == "" {
		return au, nil
	}
	path := a.TokenFile
	au.token = reload.New(func() (string, error) {
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
	if _, err := au.token.Get(); err != nil {
		return nil, fmt.Errorf("sidecar: %w", err)
	}
	return au, nil
}

type authenticator struct {
	token       *reload.File[string]
	clientCerts bool
}

var errUnauthenticated = errors.New("unauthenticated: send Authorization: Bearer <token> or a client certificate")

// check accepts a request with a verified client certificate (when client
// certificates are a credential) or the bearer token.
func (a *authenticator) check(r *http.Request) error {
	if a.clientCerts && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return nil
	}
	if a.token == nil {
		return errUnauthenticated
	}
	want, err := a.token.Get()
	if err != nil {
		return err
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errUnauthenticated
	}
	return nil
}
