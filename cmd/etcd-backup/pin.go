package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/view"
)

func pinCmd(g *globals) *cobra.Command {
	var label string
	cmd := &cobra.Command{
		Use:   "pin KEY [--label LABEL]",
		Short: "Keep a chain whatever the retention, until it is unpinned",
		Long: `pin keeps the chain of KEY (a full snapshot, or a delta of its chain: its full is pinned)
whatever the retention policy: gc and serve's retention keep it whole, on the second site
too, and delete refuses it. The pin is a record under etcdkit/pins/ on the store; list,
fleet and the backup objects show it with its label.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, cat, err := g.catalog(ctx)
			if err != nil {
				return err
			}
			if strings.IndexFunc(label, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
				return cli.Usage(fmt.Errorf("--label %q: printable characters only", label))
			}
			p, err := snapshot.PinChain(ctx, st, cat, args[0], label, who())
			if err != nil {
				return err
			}
			g.log.Info("chain pinned", "full", p.Snapshot, "label", p.Label, "by", p.By)
			return g.print(view.PinOf(p), func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "pinned\t%s\t%s\n", p.Snapshot, p.Label)
			})
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "a word or two saying why (before-upgrade-1.34)")
	return cmd
}

func unpinCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "unpin KEY",
		Short: "Take the pin off a chain: the retention applies to it again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, cat, err := g.catalog(ctx)
			if err != nil {
				return err
			}
			switch was, err := snapshot.Unpin(ctx, st, cat, args[0]); {
			case err != nil:
				return err
			case !was:
				g.log.Info("unpin: the chain was not pinned", "snapshot", args[0])
			default:
				g.log.Info("chain unpinned", "snapshot", args[0], "by", who())
			}
			return nil
		},
	}
}

func deleteCmd(g *globals) *cobra.Command {
	var (
		before      string
		dryRun, yes bool
	)
	cmd := &cobra.Command{
		Use:   "delete [FULL...] [--before TIME] [--dry-run | --yes]",
		Short: "Delete chains by hand: named full snapshots, or every chain before a time",
		Long: `delete deletes each named full snapshot with its chain (the deltas after it up to the next
full), and with --before every chain whose newest object was written before TIME (RFC 3339,
a date, or unix seconds). It never deletes the newest chain (the one a restore uses) nor a
pinned one: a named one is refused, and then nothing is deleted; one older than --before is
spared and listed. A record of who deleted what is written under etcdkit/deletions/ first,
each delete is logged, and serve counts the records in etcdkit_operator_deletions.
It asks before deleting when it runs on a terminal; elsewhere give --yes. --dry-run lists
what would go and deletes nothing.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			opts := snapshot.DeleteOptions{Keys: args, By: who(), Logger: g.log, DryRun: true}
			if before != "" {
				t, err := parseBefore(before)
				if err != nil {
					return cli.Usage(fmt.Errorf("--before %q: %w", before, err))
				}
				opts.Before = t
			}
			if len(args) == 0 && opts.Before.IsZero() {
				return cli.Usage(errors.New("name full snapshots to delete, or give --before"))
			}
			if dryRun && yes {
				return cli.Usage(errors.New("--dry-run and --yes: one or the other"))
			}
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			plan, err := snapshot.DeleteChains(ctx, st, opts)
			if err != nil {
				return err
			}
			res := plan
			if !dryRun && len(plan.Deleted) > 0 {
				if !yes {
					if err := confirm(fmt.Sprintf("delete %d snapshots (%d chains) from %s", len(plan.Deleted), fulls(plan.Deleted), st), plan); err != nil {
						return err
					}
				}
				opts.DryRun = false
				res, err = snapshot.DeleteChains(ctx, st, opts)
				if perr := printDeleted(g, res, false); perr != nil {
					return perr
				}
				return err
			}
			return printDeleted(g, res, true)
		},
	}
	f := cmd.Flags()
	f.StringVar(&before, "before", "", "delete every chain whose newest object was written before this time")
	f.BoolVar(&dryRun, "dry-run", false, "list what would be deleted, delete nothing")
	f.BoolVar(&yes, "yes", false, "delete without asking (where no terminal is there to ask on)")
	return cmd
}

// catalog opens --store and lists its catalog.
func (g *globals) catalog(ctx context.Context) (store.Store, snapshot.Catalog, error) {
	st, err := g.openStore(ctx)
	if err != nil {
		return nil, snapshot.Catalog{}, err
	}
	cat, err := snapshot.List(ctx, st)
	return st, cat, err
}

// deleteResult is what delete prints.
type deleteResult struct {
	DryRun      bool               `json:"dry_run"`
	Snapshots   []api.SnapshotView `json:"snapshots"`
	Locked      []api.SnapshotView `json:"locked"`
	KeptForLock []api.SnapshotView `json:"kept_for_lock"`
	Spared      []keptView         `json:"spared"`
	Record      string             `json:"record,omitempty"`
}

func printDeleted(g *globals, res snapshot.DeleteResult, dryRun bool) error {
	spared, _ := keptViews(res.Spared)
	out := deleteResult{DryRun: dryRun, Snapshots: viewsOf(res.Deleted), Locked: viewsOf(res.Locked), KeptForLock: viewsOf(res.KeptForLock),
		Spared: spared, Record: res.Record}
	verb := "deleted"
	if dryRun {
		verb = "would delete"
	}
	return g.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%d snapshots %s\n", len(out.Snapshots), verb)
		for _, v := range out.Snapshots {
			fmt.Fprintf(w, "%s\t%s\t%s\n", verb, v.Key, age(time.Since(v.Created)))
		}
		for _, v := range out.Locked {
			fmt.Fprintf(w, "locked (write-once), kept\t%s\t%s\n", v.Key, age(time.Since(v.Created)))
		}
		for _, v := range out.KeptForLock {
			fmt.Fprintf(w, "kept with its locked full\t%s\t%s\n", v.Key, age(time.Since(v.Created)))
		}
		for _, v := range out.Spared {
			fmt.Fprintf(w, "spared\t%s\t%s\t%s\n", v.Key, age(time.Since(v.Created)), strings.Join(v.Rules, ", "))
		}
		if out.Record != "" {
			fmt.Fprintf(w, "recorded in %s\n", out.Record)
		}
	})
}

// confirm asks on the terminal; without one it refuses, asking for --yes.
func confirm(what string, plan snapshot.DeleteResult) error {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return cli.Usage(fmt.Errorf("%s: no terminal to ask on; look with --dry-run, then give --yes", what))
	}
	for _, s := range plan.Deleted {
		if s.Kind == snapshot.KindFull {
			fmt.Fprintf(os.Stderr, "  %s\t%s\n", s.Key, age(time.Since(s.Created)))
		}
	}
	fmt.Fprintf(os.Stderr, "%s? type yes: ", what)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return errors.New("nothing deleted")
	}
	return nil
}

func fulls(snaps []snapshot.Snapshot) int {
	n := 0
	for _, s := range snaps {
		if s.Kind == snapshot.KindFull {
			n++
		}
	}
	return n
}

// parseBefore reads RFC 3339, a date (midnight UTC) or unix seconds.
func parseBefore(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return parseTimestamp(s)
}

// who is the user@host a pin or a deletion records.
func who() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + cmp.Or(host, "unknown")
}
