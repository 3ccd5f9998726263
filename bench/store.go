package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/azure"
	"github.com/etcdkit/etcdkit/store/gcs"
	"github.com/etcdkit/etcdkit/store/s3"
)

// storeBench puts and gets one object on every backend with the store's
// default options, against a plain copy of the same file (file store) or
// one single-stream request of the same SDK (emulators).
func storeBench(ctx context.Context, cfg config) ([]row, error) {
	size := int64(cfg.sizeMiB) << 20
	src := filepath.Join(cfg.dir, "object.bin")
	if err := writeRandom(src, size); err != nil {
		return nil, err
	}
	var rows []row
	add := func(r []row, err error) error {
		rows = append(rows, r...)
		return err
	}
	if err := add(fileBackend(ctx, cfg, src, size)); err != nil {
		return nil, err
	}
	for _, b := range []struct {
		kind emulator.Kind
		fn   func(context.Context, config, *emulator.Server, string, int64) ([]row, error)
	}{{emulator.S3, s3Backend}, {emulator.GCS, gcsBackend}, {emulator.Azure, azureBackend}} {
		dir := filepath.Join(cfg.dir, string(b.kind))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
		srv, err := emulator.Start(ctx, b.kind, emulator.Options{Dir: dir})
		if err != nil {
			return nil, err
		}
		err = add(b.fn(ctx, cfg, srv, src, size))
		srv.Stop()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.kind, err)
		}
	}
	return rows, nil
}

func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// measure runs ours and ref alternately and returns their medians.
func measure(runs int, ours, ref func() error) (time.Duration, time.Duration, error) {
	var o, r []time.Duration
	for range runs {
		for _, m := range []struct {
			fn  func() error
			out *[]time.Duration
		}{{ours, &o}, {ref, &r}} {
			// Dirty pages of the previous run must not slow this one down.
			syscall.Sync()
			start := time.Now()
			if err := m.fn(); err != nil {
				return 0, 0, err
			}
			*m.out = append(*m.out, time.Since(start))
		}
	}
	return median(o), median(r), nil
}

// putGet measures Put and Get of the source file through st, against
// reference functions that do the same in one plain stream.
func putGet(ctx context.Context, cfg config, subject string, st store.Store, src string, size int64,
	refName string, refPut, refGet func() error,
) ([]row, error) {
	put, get := storeOps(ctx, cfg, st, src, size)
	po, pr, err := measure(cfg.runs, put, refPut)
	if err != nil {
		return nil, fmt.Errorf("put: %w", err)
	}
	gto, gtr, err := measure(cfg.runs, get, refGet)
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	return []row{
		{Subject: subject, Op: "Put", Bytes: size, Ours: po, Reference: refName, Ref: pr},
		{Subject: subject, Op: "Get", Bytes: size, Ours: gto, Reference: refName, Ref: gtr},
	}, nil
}

// storeOps returns a Put of the source file and a Get of it into a file.
func storeOps(ctx context.Context, cfg config, st store.Store, src string, size int64) (put, get func() error) {
	put = func() error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		// Objects are written once: each run replaces the last one's.
		if err := st.Delete(ctx, "bench/object"); err != nil {
			return err
		}
		return st.Put(ctx, "bench/object", f)
	}
	get = func() error {
		rc, err := st.Get(ctx, "bench/object")
		if err != nil {
			return err
		}
		defer func() { _ = rc.Close() }()
		return copyToFile(filepath.Join(cfg.dir, "download.bin"), rc, size)
	}
	return put, get
}

func copyToFile(path string, r io.Reader, want int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != want {
		err = fmt.Errorf("read %d bytes, want %d", n, want)
	}
	return err
}

func fileBackend(ctx context.Context, cfg config, src string, size int64) ([]row, error) {
	root := filepath.Join(cfg.dir, "file-store")
	st, err := store.NewFile(root)
	if err != nil {
		return nil, err
	}
	object := filepath.Join(root, "bench", "object")
	cp := func(from, to string) func() error {
		return func() error {
			if out, err := exec.Command("cp", from, to).CombinedOutput(); err != nil {
				return fmt.Errorf("cp: %w: %s", err, out)
			}
			return nil
		}
	}
	rows, err := putGet(ctx, cfg, "file://", st, src, size, "cp", cp(src, filepath.Join(cfg.dir, "cp-put.bin")), cp(object, filepath.Join(cfg.dir, "cp-get.bin")))
	if err != nil {
		return nil, err
	}
	// Put syncs the object before it renames it into place; cp does not.
	// The same copy followed by a sync of the file is the durable
	// reference.
	put, _ := storeOps(ctx, cfg, st, src, size)
	durable := filepath.Join(cfg.dir, "cp-sync.bin")
	o, r, err := measure(cfg.runs, put, func() error {
		if err := cp(src, durable)(); err != nil {
			return err
		}
		if out, err := exec.Command("sync", durable).CombinedOutput(); err != nil {
			return fmt.Errorf("sync: %w: %s", err, out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(rows, row{Subject: "file://", Op: "Put", Bytes: size, Ours: o, Reference: "cp, then sync of the file", Ref: r}), nil
}

func s3Backend(ctx context.Context, cfg config, srv *emulator.Server, src string, size int64) ([]row, error) {
	raw := awss3.New(awss3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(srv.Endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	if _, err := raw.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		return nil, err
	}
	st, err := s3.New(ctx, s3.Config{Bucket: "bench", Endpoint: srv.Endpoint, PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		return nil, err
	}
	refPut := func() error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("ref"), Body: f, ContentLength: aws.Int64(size)})
		return err
	}
	refGet := func() error {
		out, err := raw.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String("ref")})
		if err != nil {
			return err
		}
		defer func() { _ = out.Body.Close() }()
		return copyToFile(filepath.Join(cfg.dir, "ref.bin"), out.Body, size)
	}
	rows, err := putGet(ctx, cfg, "s3:// (versitygw)", st, src, size, "one PutObject/GetObject", refPut, refGet)
	if err != nil {
		return nil, err
	}
	// The store reads S3 with its own parallel ranges rather than the
	// transfer manager's GetObject; this row is why.
	_, get := storeOps(ctx, cfg, st, src, size)
	tm := transfermanager.New(raw, func(o *transfermanager.Options) {
		o.GetObjectType = tmtypes.GetObjectRanges
		o.PartSizeBytes = store.DefaultPartSize
		o.Concurrency = store.DefaultConcurrency
		o.GetObjectBufferSize = store.DefaultPartSize * store.DefaultConcurrency
	})
	o, r, err := measure(cfg.runs, get, func() error {
		out, err := tm.GetObject(ctx, &transfermanager.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String("bench/object")})
		if err != nil {
			return err
		}
		return copyToFile(filepath.Join(cfg.dir, "ref.bin"), out.Body, size)
	})
	if err != nil {
		return nil, err
	}
	return append(rows, row{Subject: "s3:// (versitygw)", Op: "Get", Bytes: size, Ours: o, Reference: "SDK transfer manager GetObject, same parts", Ref: r}), nil
}

func gcsBackend(ctx context.Context, cfg config, srv *emulator.Server, src string, size int64) ([]row, error) {
	raw, err := storage.NewClient(ctx, option.WithEndpoint(srv.Endpoint+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		return nil, err
	}
	defer func() { _ = raw.Close() }()
	if err := raw.Bucket("bench").Create(ctx, "etcdkit-bench", nil); err != nil {
		return nil, err
	}
	st, err := gcs.New(ctx, gcs.Config{Bucket: "bench", Endpoint: srv.Endpoint})
	if err != nil {
		return nil, err
	}
	obj := raw.Bucket("bench").Object("ref")
	refPut := func() error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		w := obj.NewWriter(ctx)
		w.ChunkSize = 0 // one request
		if _, err := io.Copy(w, f); err != nil {
			_ = w.Close()
			return err
		}
		return w.Close()
	}
	refGet := func() error {
		r, err := obj.NewReader(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = r.Close() }()
		return copyToFile(filepath.Join(cfg.dir, "ref.bin"), r, size)
	}
	rows, err := putGet(ctx, cfg, "gs:// (fake-gcs-server)", st, src, size, "one upload/read request", refPut, refGet)
	if err != nil {
		return nil, err
	}
	// fake-gcs-server hashes the whole object again after every chunk of a
	// resumable upload, so chunked uploads cost it time quadratic in the
	// size. The SDK's own writer with the same chunks shows that cost.
	put, _ := storeOps(ctx, cfg, st, src, size)
	o, r, err := measure(cfg.runs, put, func() error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		w := obj.NewWriter(ctx)
		w.ChunkSize = store.DefaultPartSize
		if _, err := io.Copy(w, f); err != nil {
			_ = w.Close()
			return err
		}
		return w.Close()
	})
	if err != nil {
		return nil, err
	}
	return append(rows, row{Subject: "gs:// (fake-gcs-server)", Op: "Put", Bytes: size, Ours: o, Reference: "SDK writer, same 8 MiB chunks", Ref: r}), nil
}

func azureBackend(ctx context.Context, cfg config, srv *emulator.Server, src string, size int64) ([]row, error) {
	cred, err := container.NewSharedKeyCredential(srv.Account, srv.Key)
	if err != nil {
		return nil, err
	}
	raw, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/bench", cred, nil)
	if err != nil {
		return nil, err
	}
	if _, err := raw.Create(ctx, nil); err != nil {
		return nil, err
	}
	st, err := azure.New(ctx, azure.Config{Container: "bench", Account: srv.Account, AccountKey: srv.Key, Endpoint: srv.Endpoint})
	if err != nil {
		return nil, err
	}
	bb := raw.NewBlockBlobClient("ref")
	refPut := func() error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = bb.Upload(ctx, f, nil)
		return err
	}
	refGet := func() error {
		resp, err := bb.DownloadStream(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		return copyToFile(filepath.Join(cfg.dir, "ref.bin"), resp.Body, size)
	}
	return putGet(ctx, cfg, "azblob:// (Azurite)", st, src, size, "one Put Blob/Get Blob", refPut, refGet)
}
