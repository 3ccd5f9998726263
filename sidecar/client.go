package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client calls a sidecar's API: what a wrapper that leaves start-up to the
// sidecar needs, and snapshots on demand.
type Client struct {
	// URL is the sidecar's base URL; Token its bearer token.
	URL, Token string
	// HTTP: default http.DefaultClient.
	HTTP *http.Client
}

// Restore asks the sidecar to prepare a data dir and waits until the job
// ends, asking every poll (default 500 ms).
func (c *Client) Restore(ctx context.Context, req RestoreRequest, poll time.Duration) (Job, error) {
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	var started struct{ ID string }
	if err := c.call(ctx, http.MethodPost, "/v1/restore", req, &started); err != nil {
		return Job{}, err
	}
	for {
		var job Job
		if err := c.call(ctx, http.MethodGet, "/v1/restore/"+started.ID, nil, &job); err != nil {
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

// Full asks the sidecar to take a full snapshot now.
func (c *Client) Full(ctx context.Context) (SnapshotView, error) {
	var v SnapshotView
	err := c.call(ctx, http.MethodPost, "/v1/snapshots/full", nil, &v)
	return v, err
}

// Delta asks the sidecar to upload the events since the chain's end now.
func (c *Client) Delta(ctx context.Context) (SnapshotView, error) {
	var v SnapshotView
	err := c.call(ctx, http.MethodPost, "/v1/snapshots/delta", nil, &v)
	return v, err
}

// call sends body as JSON and decodes the answer into out; an answer
// other than 2xx is an error carrying the API's message.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
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
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("sidecar %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("sidecar %s: %w", url, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("sidecar %s: %s: %s", url, resp.Status, e.Error)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sidecar %s: %w", url, err)
	}
	return nil
}
