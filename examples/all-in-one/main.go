package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/examples/internal/demo"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	_ "github.com/etcdkit/etcdkit/store/s3"
	"github.com/etcdkit/etcdkit/wrapper"
)

func main() {
	config := flag.String("config", "", "etcd's configuration file (default: a single member in a temporary directory)")
	storeURL := flag.String("store", "", "where the backups go")
	runFor := flag.Duration("for", 0, "stop after this long (default: at SIGTERM or SIGINT)")
	peers := flag.String("peer-endpoints", "", "the other members' client URLs, comma-separated, when -config names a member of a larger cluster")
	flag.Parse()
	var endpoints []string
	if *peers != "" {
		endpoints = strings.Split(*peers, ",")
	}
	if err := run(*config, *storeURL, endpoints, *runFor); err != nil {
		fmt.Fprintln(os.Stderr, "all-in-one:", err)
		os.Exit(1)
	}
}

func run(config, storeURL string, peers []string, runFor time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, runFor)
		defer cancel()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "etcdkit-all-in-one-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cfg, err := demo.Member(dir, "m0")
	if config != "" {
		cfg, err = wrapper.LoadConfig(config)
	}
	if err != nil {
		return err
	}
	m, err := demo.Start(wrapper.Options{Config: cfg, Preparer: &startup.Local{Store: st, Logger: log}, Endpoints: peers, Logger: log,
		OnPlan: func(p startup.Plan) { fmt.Printf("member %s starts: %s (%s)\n", cfg.Name, p.Action, p.Reason) }})
	if err != nil {
		return err
	}
	endpoint := cfg.AdvertiseClientUrls[0].String()
	cli, err := demo.Client(endpoint)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	// One process needs no API between its parts: the sidecar runs
	// without one, and so needs no credential.
	sc, err := sidecar.New(sidecar.Options{
		Client:   cli,
		Endpoint: endpoint,
		Backups:  sidecar.BackupOptions{Store: st, Snapshots: capture.Options{DeltaPeriod: time.Second}},
		WorkDir:  dir,
		Logger:   log,
	})
	if err != nil {
		return err
	}
	// Alone, the member leads and its sidecar uploads at once; in a
	// larger cluster the leader's does, and a joining member is a learner
	// that takes no writes until promoted.
	alone := len(peers) == 0
	stopSidecar, err := demo.Sidecar(sc, alone)
	if err != nil {
		return err
	}
	fmt.Printf("member %s serves at %s and is backed up to %s\n", cfg.Name, endpoint, storeURL)
	written := map[string]string{}
	for i := 0; alone && ctx.Err() == nil; i++ {
		if err := demo.Write(context.Background(), cli, written, fmt.Sprintf("tick%d", i), 50); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	<-ctx.Done()
	// The order two containers cannot give: the last delta, then etcd.
	stopSidecar()
	last := sc.SnapshotStatus().LastRevision
	if err := m.Stop(); err != nil {
		return err
	}
	fmt.Printf("stopped: %d keys written, the backups reach revision %d\n", len(written), last)
	return nil
}
