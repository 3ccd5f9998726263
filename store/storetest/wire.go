package storetest

import (
	"io"
	"net/http"
	"strings"
	"sync"
)

// Wire is an http.RoundTripper that a cloud backend under test sends its
// requests through. It counts them, classifies part uploads and ranged
// downloads so the suite can assert that large objects really move in
// parts, and can answer the first attempt of every request with a 503 so the
// suite can assert that the backend retries.
type Wire struct {
	// Base carries the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// IsPartUpload reports whether a request uploads one part of a large
	// object (an S3 UploadPart, an Azure Put Block, a GCS resumable chunk).
	IsPartUpload func(*http.Request) bool

	mu       sync.Mutex
	counts   Counts
	failNew  bool
	attempts map[string]int
}

// Counts are what a Wire has seen.
type Counts struct {
	Requests    int
	PartUploads int
	RangedGets  int
	// Injected is the number of requests answered with a 503 by the Wire
	// itself.
	Injected int
	// BytesUp are the request bodies' bytes (as declared), BytesDown the
	// response bodies' bytes read.
	BytesUp, BytesDown int64
}

// Sub returns the counts seen between o and c.
func (c Counts) Sub(o Counts) Counts {
	return Counts{
		Requests:    c.Requests - o.Requests,
		PartUploads: c.PartUploads - o.PartUploads,
		RangedGets:  c.RangedGets - o.RangedGets,
		Injected:    c.Injected - o.Injected,
		BytesUp:     c.BytesUp - o.BytesUp,
		BytesDown:   c.BytesDown - o.BytesDown,
	}
}

// Counts returns what the wire has seen so far.
func (w *Wire) Counts() Counts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts
}

// FailFirstAttempts makes the wire answer the first attempt of every
// distinct request (method, URL and range) with 503 Service Unavailable,
// while on is true; retries of it go through.
func (w *Wire) FailFirstAttempts(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failNew = on
	w.attempts = map[string]int{}
}

// RoundTrip implements http.RoundTripper.
func (w *Wire) RoundTrip(req *http.Request) (*http.Response, error) {
	w.mu.Lock()
	w.counts.Requests++
	w.counts.BytesUp += max(req.ContentLength, 0)
	if w.IsPartUpload != nil && w.IsPartUpload(req) {
		w.counts.PartUploads++
	}
	rng := header(req, "Range") + header(req, "X-Ms-Range")
	if req.Method == http.MethodGet && rng != "" {
		w.counts.RangedGets++
	}
	inject := false
	if w.failNew {
		id := strings.Join([]string{req.Method, req.URL.String(), rng, header(req, "Content-Range")}, " ")
		w.attempts[id]++
		inject = w.attempts[id] == 1
		if inject {
			w.counts.Injected++
		}
	}
	w.mu.Unlock()

	if inject {
		// A RoundTripper closes the request body even when it sends nothing.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return &http.Response{
			Status:     "503 Service Unavailable",
			StatusCode: http.StatusServiceUnavailable,
			Proto:      "HTTP/1.1",
			ProtoMajor: 1,
			ProtoMinor: 1,
			Header:     http.Header{"Content-Type": {"text/plain"}, "Retry-After": {"0"}},
			Body:       io.NopCloser(strings.NewReader("injected by storetest.Wire")),
			Request:    req,
		}, nil
	}
	base := w.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = &countedBody{ReadCloser: resp.Body, w: w}
	}
	return resp, err
}

// countedBody counts a response body's bytes as they are read.
type countedBody struct {
	io.ReadCloser
	w *Wire
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.mu.Lock()
	b.w.counts.BytesDown += int64(n)
	b.w.mu.Unlock()
	return n, err
}

// header reads a request header whatever case the SDK wrote its name in:
// some set the map directly, without canonical names.
func header(req *http.Request, name string) string {
	for k, v := range req.Header {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}
