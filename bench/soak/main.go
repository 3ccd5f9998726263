package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/soak"
)

func main() {
	var (
		o     soak.Options
		kinds string
		quiet bool
	)
	flag.Uint64Var(&o.Seed, "seed", 1, "chooses the faults, their moments and the traffic")
	flag.DurationVar(&o.Duration, "duration", 0, "how long faults are injected (default 2m)")
	flag.StringVar(&o.Dir, "dir", "", "work dir, kept for the logs (default: a new temporary dir)")
	flag.StringVar(&kinds, "kinds", "", "comma-separated fault kinds (default: all of "+strings.Join(soak.Kinds(), ", ")+")")
	flag.DurationVar(&o.Hold, "hold", 0, "longest a fault lasts (default 8s)")
	flag.DurationVar(&o.Gap, "gap", 0, "longest pause between a recovery and the next fault (default 3s)")
	flag.IntVar(&o.Writers, "writers", 0, "concurrent clients of the traffic (default 8)")
	flag.IntVar(&o.Restores, "restores", 0, "restores checked at the end (default 6)")
	flag.StringVar(&o.StepFrom, "step-from", "", "an etcd 3.6 server binary the members start on, stepped to the wrapper's embedded etcd by the rolling-step fault (default: they run the embedded etcd)")
	flag.BoolVar(&quiet, "quiet", false, "print only the report")
	flag.Parse()
	if kinds != "" {
		o.Kinds = strings.Split(kinds, ",")
	}
	level := slog.LevelInfo
	if quiet {
		level = slog.LevelWarn
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	rep.Write(os.Stdout)
	if len(rep.Violations) > 0 {
		os.Exit(1)
	}
}

func run(ctx context.Context, o soak.Options) (soak.Report, error) {
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "etcdkit-soak-")
		if err != nil {
			return soak.Report{}, err
		}
		o.Dir = dir
	}
	if err := soak.Build(ctx, &o, filepath.Join(o.Dir, "bin")); err != nil {
		return soak.Report{}, err
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "s3"), 0o700); err != nil {
		return soak.Report{}, err
	}
	srv, err := emulator.Start(ctx, emulator.S3, emulator.Options{Dir: filepath.Join(o.Dir, "s3")})
	if err != nil {
		return soak.Report{}, err
	}
	defer srv.Stop()
	if err := soak.UseS3(ctx, &o, srv, o.Dir); err != nil {
		return soak.Report{}, err
	}
	return soak.Run(ctx, o)
}
