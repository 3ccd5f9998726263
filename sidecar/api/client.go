package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/tlsfiles"
)

// ErrRefused matches an answer that refuses the request itself (4xx):
// asking again does not change it.
var ErrRefused = errors.New("the sidecar refused the request")

// Error is an answer other than 2xx, with the API's message.
type Error struct {
	URL     string
	Status  string
	Code    int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("sidecar %s: %s: %s", e.URL, e.Status, e.Message) }

// Is matches ErrRefused for 4xx answers but a timeout or too many requests.
func (e *Error) Is(target error) bool {
	return target == ErrRefused && e.Code/100 == 4 && e.Code != http.StatusRequestTimeout && e.Code != http.StatusTooManyRequests
}

// Client calls a sidecar's API: what a wrapper that leaves start-up to the
// sidecar needs, and snapshots on demand.
type Client struct {
	// URL is the sidecar's base URL; Token its bearer token.
	URL, Token string
	// TLS, for an https URL: the CA bundle that signed the sidecar's
	// certificate (default: the system's roots) and, where the sidecar
	// takes client certificates instead of the token, this client's
	// certificate and key. They are read again when they change.
	TLS tlsfiles.Files
	// Timeout bounds each call that answers at once: a restore's start and
	// its status. Full and Delta wait for the snapshot, as long as ctx
	// lets them. Default 30 s.
	Timeout time.Duration

	mu   sync.Mutex
	http *http.Client
	tls  *tlsfiles.Client
}

// client returns the HTTP client, made at the first call; a TLS file that
// does not load is an error then.
func (c *Client) client() (*http.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.http != nil {
		return c.http, nil
	}
	files, err := c.TLS.NewClient(nil)
	if err != nil {
		return nil, fmt.Errorf("sidecar %s: %w", c.URL, err)
	}
	c.tls, c.http = files, &http.Client{Transport: files.Transport(c.timeout())}
	return c.http, nil
}

func (c *Client) timeout() time.Duration {
	if c.Timeout <= 0 {
		return 30 * time.Second
	}
	return c.Timeout
}

// Check loads the TLS files, so a bad one is an error at start rather
// than at the first call.
func (c *Client) Check() error {
	_, err := c.client()
	return err
}

// Restore asks the sidecar to prepare a data dir and waits until the job
// ends, asking every poll (default 500 ms).
func (c *Client) Restore(ctx context.Context, req RestoreRequest, poll time.Duration) (Job, error) {
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	var started RestoreStarted
	if err := c.call(ctx, true, http.MethodPost, "/v1/restore", req, &started); err != nil {
		return Job{}, err
	}
	for {
		var job Job
		if err := c.call(ctx, true, http.MethodGet, "/v1/restore/"+started.ID, nil, &job); err != nil {
			return job, err
		}
		if job.State != JobRunning {
			return job, nil
		}
		select {
		case <-ctx.Done():
			return job, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// Validate asks the sidecar for a data dir's verdict and what its store
// holds. The full checks read every page: it waits as long as ctx lets it.
func (c *Client) Validate(ctx context.Context, req ValidateRequest) (Validation, error) {
	var v Validation
	err := c.call(ctx, false, http.MethodPost, "/v1/validate", req, &v)
	return v, err
}

// Full asks the sidecar to take a full snapshot now.
func (c *Client) Full(ctx context.Context) (SnapshotView, error) {
	var v SnapshotView
	err := c.call(ctx, false, http.MethodPost, "/v1/snapshots/full", nil, &v)
	return v, err
}

// Delta asks the sidecar to upload the events since the chain's end now.
func (c *Client) Delta(ctx context.Context) (SnapshotView, error) {
	var v SnapshotView
	err := c.call(ctx, false, http.MethodPost, "/v1/snapshots/delta", nil, &v)
	return v, err
}

// call sends body as JSON and decodes the answer into out; an answer
// other than 2xx is an error carrying the API's message. A call that
// answers at once is bounded by the client's timeout.
func (c *Client) call(ctx context.Context, prompt bool, method, path string, body, out any) error {
	if prompt {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout())
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	url := strings.TrimSuffix(c.URL, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc, err := c.client()
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if explained := c.tls.Explain(err); explained != nil {
		return fmt.Errorf("sidecar %s: %w", url, explained)
	}
	if err != nil {
		return fmt.Errorf("sidecar %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return fmt.Errorf("sidecar %s: %w", url, err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorBody
		_ = json.Unmarshal(b, &e)
		if e.Error == "" && strings.Contains(string(b), "HTTP request to an HTTPS server") {
			return fmt.Errorf("sidecar %s: the sidecar serves HTTPS: use an https:// URL", url)
		}
		return &Error{URL: url, Status: resp.Status, Code: resp.StatusCode, Message: e.Error}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sidecar %s: %w", url, err)
	}
	return nil
}
