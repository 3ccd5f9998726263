package etcdbrapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The initialization's states, as /initialization/status writes them. A
// final state (Successful, Failed) is reported once; the next status is
// New.
const (
	StateNew        = "New"
	StateProgress   = "Progress"
	StateSuccessful = "Successful"
	StateFailed     = "Failed"
)

// Validation modes of /initialization/start: Sanity after a clean
// shutdown, Full otherwise.
const (
	Sanity = "sanity"
	Full   = "full"
)

// ErrFailed is an initialization the sidecar reported as failed: its log
// says why.
var ErrFailed = errors.New("the sidecar's initialization failed (its log says why)")

// Client calls one sidecar. Base is its URL (https://host:8080); HTTP
// carries the calls (its TLS trusts the sidecar's certificate). Default: a
// plain client that gives up on a call after a minute, etcd-wrapper's
// bound.
type Client struct {
	Base string
	HTTP *http.Client
	// Poll is how often the status is asked while the initialization
	// runs. Default 1 s, as etcd-wrapper asks.
	Poll time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
}

func (c *Client) get(ctx context.Context, path string) (string, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	u := strings.TrimSuffix(c.Base, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("etcd-backup-restore %s: %w", c.Base, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("etcd-backup-restore %s: %w", c.Base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("etcd-backup-restore %s: GET %s: %w", c.Base, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("etcd-backup-restore %s: GET %s: %s", c.Base, path, resp.Status)
	}
	return string(b), nil
}

// Status is the initialization's state. Reading a final state resets it
// to New on the sidecar.
func (c *Client) Status(ctx context.Context) (string, error) {
	return c.get(ctx, "/initialization/status")
}

// Start asks the sidecar to initialize the data dir in mode (Sanity or
// Full); a sidecar already initializing ignores it.
func (c *Client) Start(ctx context.Context, mode string) error {
	_, err := c.get(ctx, "/initialization/start?mode="+url.QueryEscape(mode))
	return err
}

// Config is the etcd configuration the sidecar renders for its member.
func (c *Client) Config(ctx context.Context) ([]byte, error) {
	s, err := c.get(ctx, "/config")
	return []byte(s), err
}

// Initialize has the sidecar validate the data dir and restore it as it
// judges, and waits until it has: nil once it reports Successful,
// ErrFailed once it reports Failed. A sidecar that does not answer yet is
// asked again until ctx ends; one that reports New (it restarted, or
// another client read the final state) is asked to start again.
func (c *Client) Initialize(ctx context.Context, mode string) error {
	poll := c.Poll
	if poll <= 0 {
		poll = time.Second
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var last error
	for {
		state, err := c.Status(ctx)
		switch {
		case err != nil:
			last = err
		case state == StateSuccessful:
			return nil
		case state == StateFailed:
			return ErrFailed
		case state == StateNew:
			if err := c.Start(ctx, mode); err != nil {
				last = err
			} else {
				log.Info("etcd-backup-restore: initialization started", "sidecar", c.Base, "mode", mode)
			}
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
