package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/examples/internal/demo"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/wrapper"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wrapper-owns-init:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	dir, err := os.MkdirTemp("", "etcdkit-wrapper-owns-init-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	st, err := store.Open(ctx, "file://"+filepath.Join(dir, "backups"))
	if err != nil {
		return err
	}
	cfg, err := demo.Member(dir, "m0")
	if err != nil {
		return err
	}

	// The wrapper's container: etcd's configuration and the store.
	w := wrapper.Options{Config: cfg, Preparer: &startup.Local{Store: st, Logger: log}, Logger: log}
	m, err := demo.Start(w)
	if err != nil {
		return err
	}
	fmt.Println("the wrapper started the member; no sidecar was asked")

	// The sidecar's container: the store and the member's endpoint; no
	// restore root, so it restores nothing.
	endpoint := cfg.AdvertiseClientUrls[0].String()
	cli, err := demo.Client(endpoint)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	sc, err := sidecar.New(sidecar.Options{
		Client:   cli,
		Endpoint: endpoint,
		Backups:  sidecar.BackupOptions{Store: st, Snapshots: capture.Options{DeltaPeriod: time.Hour, RetentionPeriod: capture.Off}},
		WorkDir:  dir,
		Logger:   log,
	})
	if err != nil {
		return err
	}
	stopSidecar, err := demo.Sidecar(sc, true)
	if err != nil {
		return err
	}
	defer stopSidecar()

	m, err = demo.RoundTrip(ctx, cli, cfg.Dir, m, func() error {
		_, err := capture.Full(ctx, cli, st, snapshot.FullOptions{})
		return err
	}, func() (*demo.Running, error) {
		fmt.Println("the wrapper validates the data dir, finds it Corrupt, and restores it from the store")
		return demo.Start(w)
	})
	if m != nil {
		_ = m.Stop()
	}
	return err
}
