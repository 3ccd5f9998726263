package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
)

// etcdTools builds etcdctl and etcdutl from tools/etcd, after checking that
// module pins the etcd version the main module uses.
func etcdTools(ctx context.Context, dir string) (etcdctl, etcdutl string, err error) {
	tools, err := emulator.ToolsDir()
	if err != nil {
		return "", "", err
	}
	modDir := filepath.Join(tools, "etcd")
	ours, err := goOutput(ctx, filepath.Dir(tools), "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3")
	if err != nil {
		return "", "", err
	}
	theirs, err := goOutput(ctx, modDir, "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/etcdctl/v3")
	if err != nil {
		return "", "", err
	}
	if ours != theirs {
		return "", "", fmt.Errorf("tools/etcd pins etcdctl %s but the module uses etcd %s: run go get -tool in tools/etcd", theirs, ours)
	}
	bin := filepath.Join(dir, "bin")
	if _, err := goOutput(ctx, modDir, "build", "-o", bin+"/", "go.etcd.io/etcd/etcdctl/v3", "go.etcd.io/etcd/etcdutl/v3"); err != nil {
		return "", "", err
	}
	fmt.Fprintf(os.Stderr, "bench: etcdctl and etcdutl %s built\n", ours)
	return filepath.Join(bin, "etcdctl"), filepath.Join(bin, "etcdutl"), nil
}

func goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// Each module alone: tools/etcd is outside the workspace, and the
	// library's etcd is what its own go.mod pins.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// embedded is one embedded etcd member for the benchmarks, fsync off: the
// benchmarks read from it and do not measure its writes.
type embedded struct {
	etcd     *embed.Etcd
	endpoint string
	cli      *clientv3.Client
}

func startMember(dir string) (*embedded, error) {
	peer, client, err := etcdtest.FreeURLs()
	if err != nil {
		return nil, err
	}
	return start(dir, "bench", peer, client, true)
}

// startMemberAt starts a member on an existing data dir, fsync off, as
// etcd-backup-restore runs the embedded etcd of its restores
// (UnsafeNoFsync in its pkg/miscellaneous).
func startMemberAt(dir, name string, peer, client url.URL) (*embedded, error) {
	return start(dir, name, peer, client, true)
}

func start(dir, name string, peer, client url.URL, noFsync bool) (*embedded, error) {
	return startIn(dir, name, peer, client, noFsync, name+"="+peer.String())
}

// startIn starts a member of the cluster initialCluster names; it returns
// once the cluster has a leader, so a cluster's members start side by side.
func startIn(dir, name string, peer, client url.URL, noFsync bool, initialCluster string) (*embedded, error) {
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = dir
	cfg.LogLevel = "fatal"
	cfg.UnsafeNoFsync = noFsync
	// Room for the large benchmark's 8 GiB database.
	cfg.QuotaBackendBytes = 16 << 30
	cfg.MaxTxnOps = 1024
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = initialCluster
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("etcd in %s did not start", dir)
	}
	cli, err := etcdclient.New(context.Background(), etcdclient.Config{Endpoints: []string{client.String()}})
	if err != nil {
		e.Close()
		return nil, err
	}
	return &embedded{etcd: e, endpoint: client.String(), cli: cli}, nil
}

func (m *embedded) close() {
	_ = m.cli.Close()
	m.etcd.Close()
}

// fill writes about size bytes of values: half random, half text, so
// compression has something to do, in transactions of 64 puts of 8 KiB.
func fill(ctx context.Context, cli *clientv3.Client, size int64) error {
	return fillValues(ctx, cli, size, 8<<10)
}

// fillValues is fill with values of valueSize bytes: small values make
// a database of many leaf pages rather than of overflow runs.
func fillValues(ctx context.Context, cli *clientv3.Client, size int64, valueSize int) error {
	const perTxn, workers = 64, 4
	txns := int(size / int64(valueSize*perTxn))
	return parallel(workers, func(w int) error {
		value := make([]byte, valueSize)
		for i := w; i < txns; i += workers {
			ops := make([]clientv3.Op, perTxn)
			for j := range ops {
				_, _ = rand.Read(value[:valueSize/2])
				copy(value[valueSize/2:], strings.Repeat(fmt.Sprintf("key %d/%d ", i, j), valueSize))
				ops[j] = clientv3.OpPut(fmt.Sprintf("/fill/%06d/%02d", i, j), string(value))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				return err
			}
		}
		return nil
	})
}

// parallel runs f on n workers and returns the first error.
func parallel(n int, f func(worker int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Go(func() {
			if err := f(w); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
