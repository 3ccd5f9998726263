package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
)

// extendBench times extend-immutability of a cfg.dbMiB full on an S3
// bucket with Object Lock (versitygw) against DEP-06's way, a download
// and an upload through the process, and counts the bytes each moves
// through it.
func extendBench(ctx context.Context, cfg config) ([]row, error) {
	size := int64(cfg.dbMiB) << 20
	src := filepath.Join(cfg.dir, "full.bin")
	if err := writeRandom(src, size); err != nil {
		return nil, err
	}
	dir := filepath.Join(cfg.dir, "s3-locked")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	srv, err := emulator.Start(ctx, emulator.S3, emulator.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	if err := srv.CreateLockedS3Bucket(ctx, "locked", 1); err != nil {
		return nil, err
	}
	wire := &countingTransport{base: http.DefaultTransport}
	st, err := s3.New(ctx, s3.Config{Bucket: "locked", Prefix: "etcd-main", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Options: store.Options{Transport: wire}})
	if err != nil {
		return nil, err
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	full := fmt.Sprintf("v2/Full-00000000-00100000-%d", time.Now().Add(-time.Hour).Unix())
	err = st.Put(ctx, full, f)
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	// Each run names its copy a second after the newest: runs in one
	// second do not collide.
	clock := time.Now()
	var oursBytes, refBytes int64
	ours := func() error {
		clock = clock.Add(time.Second)
		before := wire.n.Load()
		res, err := snapshot.Extend(ctx, st, snapshot.ExtendOptions{Now: func() time.Time { return clock }})
		if err == nil && !res.OnServer {
			err = fmt.Errorf("the copy went through the process")
		}
		oursBytes = wire.n.Load() - before
		return err
	}
	n := 0
	ref := func() error {
		n++
		before := wire.n.Load()
		rc, err := st.Get(ctx, full)
		if err != nil {
			return err
		}
		defer func() { _ = rc.Close() }()
		err = st.Put(ctx, fmt.Sprintf("v2/Full-00000000-00100000-%d", clock.Add(time.Duration(1000+n)*time.Second).Unix()), rc)
		refBytes = wire.n.Load() - before
		return err
	}
	o, r, err := measure(cfg.runs, ours, ref)
	if err != nil {
		return nil, err
	}
	return []row{{
		Subject: "extend-immutability, S3 with Object Lock (versitygw)", Op: "copy the latest full on the server", Bytes: size,
		Ours: o, Reference: "download and upload through the process (DEP-06's re-upload)", Ref: r,
		Note: fmt.Sprintf("bytes through the process: %d (ours), %d (the re-upload)", oursBytes, refBytes),
	}}, nil
}

// countingTransport counts the bytes of request and response bodies.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(max(req.ContentLength, 0))
	resp, err := c.base.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = &countedBody{ReadCloser: resp.Body, n: &c.n}
	}
	return resp, err
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
