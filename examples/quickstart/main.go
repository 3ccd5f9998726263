package main

import (
	"context"
	"errors"
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
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate"
	"github.com/etcdkit/etcdkit/wrapper"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// report times the steps and prints what each did.
type report struct{ start, last time.Time }

func (r *report) step(what string, format string, args ...any) {
	now := time.Now()
	fmt.Printf("%-34s %6.2fs  %s\n", what, now.Sub(r.last).Seconds(), fmt.Sprintf(format, args...))
	r.last = now
}

func run() error {
	ctx := context.Background()
	r := &report{start: time.Now(), last: time.Now()}
	fmt.Print("etcdkit quickstart: one member, its sidecar, backups on the file store\n\n")
	dir, err := os.MkdirTemp("", "etcdkit-quickstart-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	// The packages log through slog; the report below tells the story.
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(ctx, "file://"+filepath.Join(dir, "backups"))
	if err != nil {
		return err
	}
	cfg, err := demo.Member(dir, "m0")
	if err != nil {
		return err
	}
	w := wrapper.Options{Config: cfg, Preparer: &startup.Local{Store: st, Logger: log}, Logger: log}
	m, err := demo.Start(w)
	if err != nil {
		return err
	}
	endpoint := cfg.AdvertiseClientUrls[0].String()
	r.step("start a member (as etcd-wrapper)", "data dir %s, client %s", cfg.Dir, endpoint)

	cli, err := demo.Client(endpoint)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	const token = "quickstart-token"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return err
	}
	sc, err := sidecar.New(sidecar.Options{
		Client:     cli,
		Endpoint:   endpoint,
		Backups:    sidecar.BackupOptions{Store: st, Snapshots: capture.Options{FullSchedule: "@every 1h", DeltaPeriod: time.Hour, RetentionPeriod: capture.Off}},
		WorkDir:    dir,
		Logger:     log,
		Membership: sidecar.MembershipOptions{Follow: member.FollowOptions{Interval: 100 * time.Millisecond}},
	})
	if err != nil {
		return err
	}
	url, stopSidecar, err := demo.Serve(sc, sidecar.ServeOptions{Auth: sidecar.Auth{TokenFile: tokenFile}}, true)
	if err != nil {
		return err
	}
	defer stopSidecar()
	client := &api.Client{URL: url, Token: token}
	r.step("start its sidecar (as serve)", "API %s, uploading: its member leads", url)

	written := map[string]string{}
	if err := demo.Write(ctx, cli, written, "first", 1000); err != nil {
		return err
	}
	r.step("write 1000 keys", "")
	full, err := client.Full(ctx)
	if err != nil {
		return err
	}
	r.step("POST /v1/snapshots/full", "%s (%d bytes)", full.Key, full.Size)
	for i, n := range []int{500, 250} {
		if err := demo.Write(ctx, cli, written, fmt.Sprintf("delta%d", i), n); err != nil {
			return err
		}
		delta, err := client.Delta(ctx)
		if err != nil {
			return err
		}
		r.step(fmt.Sprintf("write %d keys, POST .../delta", n), "%s: revisions %d-%d", delta.Key, delta.StartRevision, delta.LastRevision)
	}

	if err := m.Stop(); err != nil {
		return err
	}
	if err := demo.Damage(cfg.Dir); err != nil {
		return err
	}
	r.step("stop the member, damage its DB", "cut to 32 KiB")
	rep, err := validate.DataDir(ctx, cfg.Dir, validate.Options{})
	if err != nil {
		return err
	}
	r.step("validate the data dir", "verdict %s: %s", rep.Verdict, rep.Reason)

	if m, err = demo.Start(w); err != nil {
		return err
	}
	defer func() { _ = m.Stop() }()
	aside, _ := filepath.Glob(cfg.Dir + ".bak-*")
	if len(aside) != 1 {
		return errors.New("the wrapper did not restore: no data dir was moved aside")
	}
	r.step("restart: the wrapper restores", "from the store; the damaged dir is now %s", aside[0])
	rev, err := demo.Check(ctx, cli, written)
	if err != nil {
		return err
	}
	r.step("read every key back", "all %d keys, at revision %d", len(written), rev)
	fmt.Printf("\ndone in %.1fs\n", time.Since(r.start).Seconds())
	return nil
}
