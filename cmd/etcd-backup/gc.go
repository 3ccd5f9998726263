package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/view"
)

// retention is the retention flags serve and gc share.
type retention struct {
	policy   string
	r        snapshot.Retention
	maxSize  cli.Bytes
	timezone string
}

func (r *retention) flags(cmd *cobra.Command) { r.flagSet(cmd.Flags()) }

func (r *retention) flagSet(f *pflag.FlagSet) {
	f.StringVar(&r.policy, "retention-policy", "", "exponential, limit-based or calendar (the union of the --keep-…, --max-age and --max-size rules given); default exponential, or calendar when such a rule is given")
	f.IntVar(&r.r.MaxFulls, "max-fulls", 7, "full snapshots limit-based retention keeps")
	f.DurationVar(&r.r.DeltaRetention, "delta-retention", 0, "how long the deltas of superseded chains are kept (0: as long as their full)")
	f.IntVar(&r.r.Hourly, "keep-hourly", 0, "calendar: keep the newest full of each of the newest N hours that hold one")
	f.IntVar(&r.r.Daily, "keep-daily", 0, "calendar: the newest full of each of the newest N days that hold one")
	f.IntVar(&r.r.Weekly, "keep-weekly", 0, "calendar: the newest full of each of the newest N ISO weeks that hold one")
	f.IntVar(&r.r.Monthly, "keep-monthly", 0, "calendar: the newest full of each of the newest N months that hold one")
	f.IntVar(&r.r.Yearly, "keep-yearly", 0, "calendar: the newest full of each of the newest N years that hold one")
	f.DurationVar(&r.r.MaxAge, "max-age", 0, "calendar: keep every full younger than this (0: no such rule)")
	f.Var(&r.maxSize, "max-size", "calendar: keep the newest fulls whose chains together fit in this size (500MiB, 20GiB, …; 0: no such rule)")
	f.StringVar(&r.timezone, "retention-timezone", "UTC", "calendar: the time zone hours, days, weeks, months and years are counted in (an IANA name: Europe/Berlin)")
}

func (r *retention) retention() (snapshot.Retention, error) {
	r.r.MaxSize = int64(r.maxSize)
	policy := r.policy
	if policy == "" {
		policy = "exponential"
		if r.r.Hourly != 0 || r.r.Daily != 0 || r.r.Weekly != 0 || r.r.Monthly != 0 || r.r.Yearly != 0 || r.r.MaxAge != 0 || r.r.MaxSize != 0 {
			policy = "calendar"
		}
	}
	switch strings.ToLower(policy) {
	case "exponential":
		r.r.Policy = snapshot.Exponential
	case "limit-based", "limitbased":
		r.r.Policy = snapshot.LimitBased
	case "calendar":
		r.r.Policy = snapshot.Calendar
	default:
		return r.r, cli.Usage(fmt.Errorf("--retention-policy %q: exponential, limit-based or calendar", r.policy))
	}
	loc, err := time.LoadLocation(r.timezone)
	if err != nil {
		return r.r, cli.Usage(fmt.Errorf("--retention-timezone %q: %w", r.timezone, err))
	}
	r.r.Location = loc
	if err := cli.AtLeast("max-fulls", int64(r.r.MaxFulls), 1); err != nil {
		return r.r, err
	}
	if err := (cli.Durations{{"delta-retention", r.r.DeltaRetention, true}, {"max-age", r.r.MaxAge, true}}).Check(); err != nil {
		return r.r, err
	}
	if err := r.r.Check(); err != nil {
		return r.r, cli.Usage(err)
	}
	return r.r, nil
}

// fullSplayHelp is --full-splay's, in serve and server.
const fullSplayHelp = "delay each scheduled full by an offset below this, fixed for the store's prefix (a hash of its URL), so a fleet's sidecars on one bucket do not all take their fulls at once; keep it below the schedule's period (0: none)"

// secondaryRetentionHelp is --secondary-retention's, in serve and server.
const secondaryRetentionHelp = "the second site's retention: same (the first site's), none (it keeps every snapshot copied there), or a policy with the retention flags' names and values, as calendar:keep-daily=30,keep-monthly=24 or limit-based:max-fulls=30"

// siteRetention is the second site's retention, from its flag: "same"
// (the first site's), "none" (it keeps every snapshot copied there), or
// the retention flags' words: a policy and name=value pairs, as
// "calendar:keep-daily=30,keep-monthly=24" or "limit-based:max-fulls=30".
func siteRetention(flag, spec string) (r *snapshot.Retention, keepAll bool, err error) {
	switch spec {
	case "", "same":
		return nil, false, nil
	case "none":
		return nil, true, nil
	}
	var ret retention
	fs := pflag.NewFlagSet(flag, pflag.ContinueOnError)
	ret.flagSet(fs)
	policy, pairs, _ := strings.Cut(spec, ":")
	set := func(name, value string) error {
		if err := fs.Set(name, value); err != nil {
			return cli.Usage(fmt.Errorf("--%s %q: %s: %w (same, none, or a policy and the retention flags' names: calendar:keep-daily=30,keep-monthly=24)", flag, spec, name, err))
		}
		return nil
	}
	if err := set("retention-policy", policy); err != nil {
		return nil, false, err
	}
	given := map[string]bool{}
	for pair := range strings.SplitSeq(pairs, ",") {
		if pair == "" {
			continue
		}
		name, value, _ := strings.Cut(pair, "=")
		if given[name] {
			return nil, false, cli.Usage(fmt.Errorf("--%s %q: %s is given twice", flag, spec, name))
		}
		given[name] = true
		if name == "retention-policy" {
			return nil, false, cli.Usage(fmt.Errorf("--%s %q: the policy comes first, before the colon", flag, spec))
		}
		if err := set(name, value); err != nil {
			return nil, false, err
		}
	}
	got, err := ret.retention()
	if err != nil {
		return nil, false, cli.Usage(fmt.Errorf("--%s: %w", flag, err))
	}
	return &got, false, nil
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
			survivors, deltas := keptViews(res.Kept)
			out := gcResult{DryRun: dryRun, Kept: survivors, KeptForLock: kept, Locked: locked, SetAside: aside, Snapshots: views}
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
				if dryRun {
					// What stays, and which rules keep it: a full a line,
					// its chain's deltas counted beside it.
					for _, k := range survivors {
						if k.Kind != string(snapshot.KindFull) {
							continue
						}
						kept := strings.Join(k.Rules, ", ")
						if n := deltas[k.Key]; n > 0 {
							kept += fmt.Sprintf(" (with %d deltas)", n)
						}
						fmt.Fprintf(w, "would keep\t%s\t%s\t%s\n", k.Key, age(time.Since(k.Created)), kept)
					}
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

// keptView is a snapshot retention keeps, and the rules that keep it.
type keptView struct {
	api.SnapshotView
	Rules []string `json:"rules"`
}

// keptViews are kept's views, and for each full the count of deltas
// kept in its chain.
func keptViews(kept []snapshot.Kept) ([]keptView, map[string]int) {
	views := make([]keptView, 0, len(kept))
	deltas := map[string]int{}
	for _, k := range kept {
		views = append(views, keptView{SnapshotView: view.SnapshotOf(k.Snapshot), Rules: k.Rules})
		if k.Full != "" {
			deltas[k.Full]++
		}
	}
	return views, deltas
}

// gcResult is what gc prints.
type gcResult struct {
	DryRun      bool               `json:"dry_run"`
	Kept        []keptView         `json:"kept"`
	KeptForLock []api.SnapshotView `json:"kept_for_lock"`
	Locked      []api.SnapshotView `json:"locked"`
	SetAside    []setAsideView     `json:"set_aside"`
	Snapshots   []api.SnapshotView `json:"snapshots"`
}
