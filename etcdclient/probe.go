package etcdclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/tlsfiles"
)

// probe connects to each endpoint the way an HTTP client of etcd's
// /health does, because that fails with the reason, where a gRPC call
// with a wrong CA or a refused certificate only waits out its deadline.
// It succeeds when one endpoint answers, fails with the reasons a setting
// fixes when none does, and with ErrUnreachable when no endpoint accepts
// a connection at all.
func probe(ctx context.Context, c Config, files *tlsfiles.Client) error {
	type answer struct {
		ep       string
		answered bool
		err      error
	}
	answers := make([]answer, len(c.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range c.Endpoints {
		wg.Go(func() {
			answered, err := probeOne(ctx, ep, c.DialTimeout, files)
			answers[i] = answer{ep, answered, err}
		})
	}
	wg.Wait()
	var (
		wrong, down joined
		ok          int
	)
	for _, a := range answers {
		err := a.err
		if len(answers) > 1 && err != nil {
			err = fmt.Errorf("%s: %w", a.ep, err)
		}
		switch {
		case !a.answered:
			down = append(down, err)
		case err != nil:
			wrong = append(wrong, err)
		default:
			ok++
		}
	}
	switch {
	case ok > 0:
		for _, err := range wrong {
			c.Logger.Warn("etcd: a member refuses this client; the others answer", "error", err)
		}
		return nil
	case len(wrong) > 0:
		return wrong
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, down)
}

// probeOne says whether the endpoint accepts a connection and, if it
// does, why it refuses this client (nil: it does not).
func probeOne(ctx context.Context, ep string, timeout time.Duration, files *tlsfiles.Client) (bool, error) {
	u, err := url.Parse(ep)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false, err
	}
	_ = conn.Close()
	if files != nil {
		tr := files.Transport(timeout)
		_, err := health(ctx, tr, ep)
		if explained := files.Explain(err); explained != nil || err == nil {
			return true, explained
		}
		// A member without TLS drops a handshake without a word.
		if _, perr := health(ctx, &http.Transport{}, "http://"+u.Host); perr == nil {
			return true, errors.New("the member does not serve TLS at this address: use an http:// URL")
		}
		return true, nil
	}
	body, err := health(ctx, &http.Transport{}, ep)
	if err == nil && !strings.Contains(body, "HTTPS server") {
		return true, nil
	}
	// A plain request that fails may have met a member that serves TLS
	// there, which a gRPC client would wait on in silence.
	if speaksTLS(ctx, u.Host) {
		return true, errors.New("the member serves TLS at this address: use an https:// URL")
	}
	return true, nil
}

// health asks base's /health over tr, on a connection of its own, and
// returns the start of the answer.
func health(ctx context.Context, tr *http.Transport, base string) (string, error) {
	tr.DisableKeepAlives = true
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/health", nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return string(b), err
}

// speaksTLS says whether a TLS handshake with addr gets as far as the
// server's answer.
func speaksTLS(ctx context.Context, addr string) bool {
	// Nothing is sent over it: the certificate does not matter.
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = conn.Close()
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// joined is several errors, printed on one line.
type joined []error

func (j joined) Error() string {
	s := make([]string, len(j))
	for i, err := range j {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (j joined) Unwrap() []error { return j }
