package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tenant"
)

// kineValue is the size of each key's value: a small Kubernetes object's.
const kineValue = 1 << 10

// kineBench backs up kine over SQLite holding -kine-keys keys of 1 KiB and
// restores the chain both ways: a logical full against one Range of the
// whole keyspace (the read it cannot do without, in one pass), the full restored into an etcd data dir against etcdutl
// snapshot restore of the same object, and restored into an empty kine
// through its API against writing the same keys into kine as its clients
// do (one create Txn each, as many writers as the restore).
func kineBench(ctx context.Context, cfg config) ([]row, error) {
	dir := filepath.Join(cfg.dir, "kine")
	_, etcdutl, err := etcdTools(ctx, cfg.dir)
	if err != nil {
		return nil, err
	}
	src, err := startKineAt(ctx, filepath.Join(dir, "source"))
	if err != nil {
		return nil, err
	}
	defer src.close()
	fmt.Fprintf(os.Stderr, "bench: writing %d keys of %d bytes into kine ...\n", cfg.kineKeys, kineValue)
	loaded, err := loadKine(ctx, src.cli, cfg.kineKeys, "/registry/bench/")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: written in %s\n", loaded.Round(time.Millisecond))
	st, err := store.NewFile(filepath.Join(dir, "store"))
	if err != nil {
		return nil, err
	}
	var full snapshot.Snapshot
	ours := func() error {
		if full.Key != "" {
			if err := st.Delete(ctx, full.Key); err != nil {
				return err
			}
		}
		var err error
		full, err = capture.FullOf(ctx, capture.NewDatastore(snapshot.SourceEtcdAPI, src.cli, capture.DatastoreOptions{SpoolDir: dir}), st,
			snapshot.FullOptions{SpoolDir: dir})
		return err
	}
	ref := func() error {
		keys, err := rangeAll(ctx, src.cli)
		if err == nil && keys < cfg.kineKeys {
			err = fmt.Errorf("the range read %d keys of %d", keys, cfg.kineKeys)
		}
		return err
	}
	of, rf, err := measure(cfg.runs, ours, ref)
	if err != nil {
		return nil, err
	}
	object := filepath.Join(storeDir(st), full.Key)
	info, err := os.Stat(object)
	if err != nil {
		return nil, err
	}
	subject := fmt.Sprintf("kine over SQLite, %d keys of 1 KiB", cfg.kineKeys)
	rows := []row{{Subject: subject, Op: "logical full → file://", Bytes: info.Size(), Ours: of,
		Reference: "one Range of the whole keyspace", Ref: rf}}

	ours = func() error {
		d := filepath.Join(dir, "restore-ours")
		defer func() { _ = os.RemoveAll(d) }()
		_, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: d}})
		return err
	}
	ref = func() error {
		d := filepath.Join(dir, "restore-etcdutl")
		defer func() { _ = os.RemoveAll(d) }()
		out, err := exec.CommandContext(ctx, etcdutl, "snapshot", "restore", object, "--data-dir", d).CombinedOutput()
		if err != nil {
			return fmt.Errorf("etcdutl snapshot restore: %w\n%s", err, out)
		}
		return nil
	}
	oe, re, err := measure(cfg.runs, ours, ref)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{Subject: subject, Op: "restore into an etcd data dir", Bytes: info.Size(), Ours: oe,
		Reference: "etcdutl snapshot restore of the same full", Ref: re})

	past, err := history.ReadState(ctx, st, history.StateOptions{WorkDir: dir})
	if err != nil {
		return nil, err
	}
	run := 0
	ours = func() error {
		run++
		dst, err := startKineAt(ctx, filepath.Join(dir, fmt.Sprint("restored-", run)))
		if err != nil {
			return err
		}
		defer dst.close()
		a, err := tenant.ApplyState(ctx, dst.cli, past, "", tenant.ApplyOptions{Apply: true, KeyByKey: true})
		if err == nil && len(a.Created) < cfg.kineKeys {
			err = fmt.Errorf("restored %d keys of %d", len(a.Created), cfg.kineKeys)
		}
		return err
	}
	ref = func() error {
		run++
		dst, err := startKineAt(ctx, filepath.Join(dir, fmt.Sprint("loaded-", run)))
		if err != nil {
			return err
		}
		defer dst.close()
		_, err = loadKine(ctx, dst.cli, cfg.kineKeys, "/registry/bench/")
		return err
	}
	ok, rk, err := measure(cfg.runs, ours, ref)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{Subject: subject, Op: "restore into an empty kine (its API)", Bytes: int64(cfg.kineKeys) * kineValue, Ours: ok,
		Reference: fmt.Sprintf("the same keys written by %d clients, a create Txn each", kineWriters), Ref: rk,
		Note: fmt.Sprintf("the source was written in %s", loaded.Round(time.Millisecond))})
	return rows, nil
}

// kineWriters write a kine at once: the bench's load and the restore's.
const kineWriters = tenant.DefaultWriters

type kineProc struct {
	srv *emulator.Server
	cli *clientv3.Client
}

func startKineAt(ctx context.Context, dir string) (*kineProc, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	srv, err := emulator.StartKine(ctx, emulator.KineOptions{Dir: dir})
	if err != nil {
		return nil, err
	}
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{srv.KineServer.ClientURL}})
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return &kineProc{srv: srv, cli: cli}, nil
}

func (k *kineProc) close() {
	_ = k.cli.Close()
	k.srv.Stop()
}

// loadKine creates n keys under prefix with kineWriters clients at once.
func loadKine(ctx context.Context, cli *clientv3.Client, n int, prefix string) (time.Duration, error) {
	start := time.Now()
	value := strings.Repeat("v", kineValue)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, kineWriters)
	for range kineWriters {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				key := fmt.Sprintf("%s%08d", prefix, i)
				resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, value)).Commit()
				if err == nil && !resp.Succeeded {
					err = fmt.Errorf("create %s: it exists", key)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

// rangeAll reads the whole keyspace in one Range: one pass over kine's
// table, the least a read of it costs (the logical full pages at 16 MiB).
func rangeAll(ctx context.Context, cli *clientv3.Client) (int, error) {
	resp, err := cli.Get(ctx, "\x00", clientv3.WithRange("\U0010FFFF"))
	if err != nil {
		return 0, err
	}
	return len(resp.Kvs), nil
}
