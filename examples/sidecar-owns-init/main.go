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
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/wrapper"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar-owns-init:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	dir, err := os.MkdirTemp("", "etcdkit-sidecar-owns-init-")
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
	endpoint := cfg.AdvertiseClientUrls[0].String()
	cli, err := demo.Client(endpoint)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()

	// The sidecar's container starts first and serves its API; it may
	// restore data dirs under the volume both containers mount.
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("secret"), 0o600); err != nil {
		return err
	}
	sc, err := sidecar.New(sidecar.Options{
		Client:     cli,
		Endpoint:   endpoint,
		Backups:    sidecar.BackupOptions{Store: st, Snapshots: capture.Options{DeltaPeriod: time.Hour, RetentionPeriod: capture.Off}},
		WorkDir:    dir,
		API:        sidecar.APIOptions{RestoreRoot: dir},
		Logger:     log,
		Membership: sidecar.MembershipOptions{Follow: member.FollowOptions{Interval: 100 * time.Millisecond}},
	})
	if err != nil {
		return err
	}
	url, stopSidecar, err := demo.Serve(sc, sidecar.ServeOptions{Auth: sidecar.Auth{TokenFile: token}}, false)
	if err != nil {
		return err
	}
	defer stopSidecar()

	// The wrapper's container: no store, only the sidecar's URL.
	w := wrapper.Options{Config: cfg, Preparer: startup.Remote{Client: &api.Client{URL: url, Token: "secret"}, Logger: log}, Logger: log}
	m, err := demo.Start(w)
	if err != nil {
		return err
	}
	fmt.Println("the sidecar found an empty data dir and left it to bootstrap; the wrapper started the member")

	m, err = demo.RoundTrip(ctx, cli, cfg.Dir, m, func() error {
		for !sc.Uploader() {
			time.Sleep(50 * time.Millisecond)
		}
		_, err := capture.Full(ctx, cli, st, snapshot.FullOptions{})
		return err
	}, func() (*demo.Running, error) {
		fmt.Println("the wrapper asks the sidecar, which finds the data dir Corrupt and restores it from the store")
		return demo.Start(w)
	})
	if m != nil {
		_ = m.Stop()
	}
	return err
}
