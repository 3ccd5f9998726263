package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/emulator/s3lock"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
	"github.com/etcdkit/etcdkit/store/storetest"
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
	if err := s3lock.CreateBucket(ctx, srv, "locked", 1); err != nil {
		return nil, err
	}
	wire := &storetest.Wire{}
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
		before := wire.Counts()
		res, err := snapshot.Extend(ctx, st, snapshot.ExtendOptions{Now: func() time.Time { return clock }})
		if err == nil && !res.OnServer {
			err = fmt.Errorf("the copy went through the process")
		}
		moved := wire.Counts().Sub(before)
		oursBytes = moved.BytesUp + moved.BytesDown
		return err
	}
	n := 0
	ref := func() error {
		n++
		before := wire.Counts()
		rc, err := st.Get(ctx, full)
		if err != nil {
			return err
		}
		defer func() { _ = rc.Close() }()
		err = st.Put(ctx, fmt.Sprintf("v2/Full-00000000-00100000-%d", clock.Add(time.Duration(1000+n)*time.Second).Unix()), rc)
		moved := wire.Counts().Sub(before)
		refBytes = moved.BytesUp + moved.BytesDown
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
