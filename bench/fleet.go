package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/fleet"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
	"github.com/etcdkit/etcdkit/store/storetest"
)

// s3Bucket starts the S3 emulator with its data in dir and makes bucket;
// the caller stops it.
func s3Bucket(ctx context.Context, dir, bucket string) (*emulator.Server, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	srv, err := emulator.Start(ctx, emulator.S3, emulator.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	raw := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	if _, err := raw.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		srv.Stop()
		return nil, err
	}
	return srv, nil
}

// fleetBench scans a bucket of -prefixes clusters' backups on S3
// (versitygw), each as its sidecar leaves them, against listing the
// bucket alone: what a fleet scan adds to the one listing it cannot do
// without, and how many requests.
func fleetBench(ctx context.Context, cfg config) ([]row, error) {
	dir := filepath.Join(cfg.dir, "fleet")
	srv, err := s3Bucket(ctx, dir, "seed")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	wire := &storetest.Wire{}
	st, err := s3.New(ctx, s3.Config{Bucket: "seed", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Options: store.Options{Transport: wire}})
	if err != nil {
		return nil, err
	}
	template, err := sidecarBackups(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: writing %d prefixes of %d objects ...\n", cfg.prefixes, len(template))
	if err := populate(ctx, st, template, cfg.prefixes); err != nil {
		return nil, err
	}
	var scanned, listed storetest.Counts
	var objects int
	ours := func() error {
		before := wire.Counts()
		f, err := fleet.Scan(ctx, st, fleet.ScanOptions{})
		if err != nil {
			return err
		}
		if len(f.Clusters) != cfg.prefixes {
			return fmt.Errorf("fleet: %d prefixes found of %d", len(f.Clusters), cfg.prefixes)
		}
		scanned, objects = wire.Counts().Sub(before), f.Objects
		return nil
	}
	ref := func() error {
		before := wire.Counts()
		_, err := st.List(ctx, "")
		listed = wire.Counts().Sub(before)
		return err
	}
	o, r, err := measure(cfg.runs, ours, ref)
	if err != nil {
		return nil, err
	}
	return []row{{
		Subject: "fleet scan, s3:// (versitygw)", Op: fmt.Sprintf("%d prefixes, %d objects", cfg.prefixes, objects), Time: true,
		Ours: o, Reference: "one listing of the bucket", Ref: r,
		Note: fmt.Sprintf("%d requests (%.1f a prefix; the listing alone %d): the listing, then each prefix's identity and newest drill record",
			scanned.Requests, float64(scanned.Requests-listed.Requests)/float64(cfg.prefixes), listed.Requests),
	}}, nil
}

// sidecarBackups are one cluster's backups as its sidecar leaves them: a
// full, a delta, the full's identity and a drill's record, by key.
func sidecarBackups(ctx context.Context, dir string) (map[string][]byte, error) {
	m, err := startMember(dir)
	if err != nil {
		return nil, err
	}
	defer m.close()
	mem, err := store.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	if _, err := m.cli.Put(ctx, "/registry/k", "v"); err != nil {
		return nil, err
	}
	full, err := capture.Full(ctx, m.cli, mem, snapshot.FullOptions{SpoolDir: dir})
	if err != nil {
		return nil, err
	}
	if _, err := m.cli.Put(ctx, "/registry/k", "w"); err != nil {
		return nil, err
	}
	deltas, err := capture.Delta(ctx, m.cli, mem, full.LastRevision, capture.DeltaOptions{})
	if err != nil || len(deltas) == 0 {
		return nil, fmt.Errorf("delta: %v %w", deltas, err)
	}
	d, err := history.LiveDigest(ctx, m.cli, deltas[0].LastRevision)
	if err != nil {
		return nil, err
	}
	if _, err := snapshot.WriteDrill(ctx, mem, snapshot.DrillRecord{At: time.Now(), Source: snapshot.DrillBySidecar, Result: snapshot.DrillOK,
		Full: full.Key, Revision: d.Revision, Keys: d.Keys, SHA256: d.SHA256, Compared: true}); err != nil {
		return nil, err
	}
	objs, err := mem.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, o := range objs {
		rc, err := mem.Get(ctx, o.Key)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return nil, err
		}
		out[o.Key] = b
	}
	return out, nil
}

// populate writes the template under seed prefixes shoot--NNNN/etcd-main,
// eight at a time.
func populate(ctx context.Context, st store.Store, template map[string][]byte, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for key, b := range template {
				if err := st.Put(ctx, fmt.Sprintf("shoot--%04d/etcd-main/%s", i, key), bytes.NewReader(b)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
