package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/view"
)

// retention is the retention flags serve and gc share.
type retention struct {
	policy string
	r      snapshot.Retention
}

func (r *retention) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.policy, "retention-policy", "exponential", "exponential or limit-based")
	f.IntVar(&r.r.MaxFulls, "max-fulls", 7, "full snapshots limit-based retention keeps")
	f.DurationVar(&r.r.DeltaRetention, "delta-retention", 0, "how long the deltas of superseded chains are kept (0: as long as their full)")
}

func (r *retention) retention() (snapshot.Retention, error) {
	switch strings.ToLower(r.policy) {
	case "exponential":
		r.r.Policy = snapshot.Exponential
	case "limit-based", "limitbased":
		r.r.Policy = snapshot.LimitBased
	default:
		return r.r, cli.Usage(fmt.Errorf("--retention-policy %q: exponential or limit-based", r.policy))
	}
	if err := cli.AtLeast("max-fulls", int64(r.r.MaxFulls), 1); err != nil {
		return r.r, err
	}
	if err := (cli.Durations{{"delta-retention", r.r.DeltaRetention, true}}).Check(); err != nil {
		return r.r, err
	}
	if err := r.r.Check(); err != nil {
		return r.r, cli.Usage(err)
	}
	return r.r, nil
}

func gcCmd(g *globals) *cobra.Command {
	var (
		ret    retention
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "gc [--dry-run]",
		Short: "Delete the backups the retention policy expires; the newest chain is always kept",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			r, err := ret.retention()
			if err != nil {
				return err
			}
			codec, err := g.snapshotCodec()
			if err != nil {
				return err
			}
			res, err := snapshot.GC(ctx, st, r, snapshot.GCOptions{DryRun: dryRun, Logger: g.log, Codec: codec})
			views, locked, kept := viewsOf(res.Deleted), viewsOf(res.Locked), viewsOf(res.KeptForLock)
			// When each lock ends, where the store tells: a question
			// unanswered leaves the column empty, not the run failed.
			ptrs := make([]*api.SnapshotView, len(locked))
			for i := range locked {
				ptrs[i] = &locked[i]
			}
			if _, lerr := lockedUntil(ctx, st, ptrs); lerr != nil {
				g.log.Warn("gc: when the locks end is not known", "err", lerr)
			}
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			aside := make([]setAsideView, len(res.SetAside))
			for i, a := range res.SetAside {
				aside[i] = setAsideView{SnapshotView: view.SnapshotOf(a.Snapshot), Why: a.Why.Error()}
			}
			out := gcResult{DryRun: dryRun, KeptForLock: kept, Locked: locked, SetAside: aside, Snapshots: views}
			if perr := g.print(out, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "%d snapshots %s\n", len(views), verb)
				if len(locked) > 0 {
					fmt.Fprintf(w, "%d locked (write-once): kept, and deleted by a later run once their lock ends\n", len(locked))
				}
				for _, v := range views {
					fmt.Fprintf(w, "%s\t%s\t%s\n", verb, v.Key, age(time.Since(v.Created)))
				}
				for _, v := range locked {
					until := ""
					if !v.LockedUntil.IsZero() {
						until = "until " + v.LockedUntil.UTC().Format(lockTime)
					}
					fmt.Fprintf(w, "locked\t%s\t%s\t%s\n", v.Key, age(time.Since(v.Created)), until)
				}
				for _, v := range kept {
					fmt.Fprintf(w, "kept with its locked full\t%s\t%s\n", v.Key, age(time.Since(v.Created)))
				}
				for _, v := range aside {
					fmt.Fprintf(w, "not counted, not deleted\t%s\t%s\n", v.Key, v.Why)
				}
			}); perr != nil {
				return perr
			}
			return err
		},
	}
	ret.flags(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be deleted, delete nothing")
	return cmd
}

// setAsideView is a full retention does not count, and why.
type setAsideView struct {
	api.SnapshotView
	Why string `json:"why"`
}

func viewsOf(snaps []snapshot.Snapshot) []api.SnapshotView {
	views := make([]api.SnapshotView, 0, len(snaps))
	for _, s := range snaps {
		views = append(views, view.SnapshotOf(s))
	}
	return views
}

// gcResult is what gc prints.
type gcResult struct {
	DryRun      bool               `json:"dry_run"`
	KeptForLock []api.SnapshotView `json:"kept_for_lock"`
	Locked      []api.SnapshotView `json:"locked"`
	SetAside    []setAsideView     `json:"set_aside"`
	Snapshots   []api.SnapshotView `json:"snapshots"`
}
