package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/view"
)

func listCmd(g *globals) *cobra.Command {
	var check bool
	cmd := &cobra.Command{
		Use:   "list [--check]",
		Short: "List the backups as chains: each full snapshot with its deltas",
		Long: `list shows every timeline's chains from the names and sizes the store lists: a chain with a gap
is marked, a damaged object is not (its name says nothing of it). --check reads every object
through its checksum too, and each full's database for the revision its name says (as a restore
does), and marks each chain whose objects do not hold; the exit code is 1
when a chain cannot be restored whole. --check also asks whether the store refuses deletes
(write-once): it deletes a probe object under etcdkit/lock-probe/, written for the question
unless an earlier one is still there; a lock that refuses keeps it, a few bytes, until it ends.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runList(cmd.Context(), g, check) },
	}
	cmd.Flags().BoolVar(&check, "check", false, "read every object through its checksum, and mark the chains whose objects do not hold")
	return cmd
}

// listResult is what list prints.
type listResult struct {
	Chains    []view.Chain       `json:"chains"`
	Timelines []api.TimelineView `json:"timelines"`
	// WriteOnce: with --check, what the store's answer to a delete says.
	WriteOnce *writeOnceProbe `json:"write_once,omitempty"`

	locked bool      // a snapshot shown is under a write-once lock
	now    time.Time // the ages are of this moment
}

// writeOnceProbe is list --check's question to the store, answered.
type writeOnceProbe struct {
	DeletesRefused  bool   `json:"deletes_refused"`
	Error           string `json:"error"`
	LockedSnapshots int    `json:"locked_snapshots"`
	Probe           string `json:"probe"`

	said string // the table's line
}

func runList(ctx context.Context, g *globals, check bool) error {
	st, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	if err := mustExist(ctx, st); err != nil {
		return err
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return err
	}
	codec, err := g.snapshotCodec()
	if err != nil {
		return err
	}
	res := listResult{Chains: []view.Chain{}, Timelines: view.TimelinesOf(cat), now: time.Now()}
	if res.Timelines == nil {
		res.Timelines = []api.TimelineView{}
	}
	pins, err := snapshot.ReadPins(ctx, st)
	if err != nil {
		return err
	}
	for _, c := range cat.AllChains() {
		lc, err := listChainOf(ctx, st, c, codec, check)
		if err != nil {
			return err
		}
		lc.Pin = view.PinFor(pins, lc.Full.Key)
		res.Chains = append(res.Chains, lc)
	}
	views := res.views()
	if res.locked, err = lockedUntil(ctx, st, views); err != nil {
		return err
	}
	switch {
	case len(res.Chains) == 0 && len(cat.Excluded) > 0:
		fmt.Fprintf(os.Stderr, "no snapshots in %s: all %d, such as %s, are taken out of the backups with %s; remove the mark from those to restore from\n",
			st, len(cat.Excluded), cat.Excluded[len(cat.Excluded)-1].Key, snapshot.ExcludeMark)
	case len(res.Chains) == 0:
		fmt.Fprintf(os.Stderr, "no snapshots in %s\n", st)
	}
	if check {
		res.WriteOnce = probeWriteOnce(ctx, st, views)
	}
	if err := g.print(res, res.table); err != nil {
		return err
	}
	problems := 0
	for _, c := range res.Chains {
		if c.Problem != "" {
			problems++
		}
	}
	if problems > 0 {
		// Scripts and alerts read the exit code, not the table.
		return fmt.Errorf("%d of %d chains cannot be restored whole (the rows marked !)", problems, len(res.Chains))
	}
	return nil
}

// mustExist refuses a file store whose directory does not exist: nothing
// was ever backed up there, and an empty list would hide the typo.
func mustExist(ctx context.Context, st store.Store) error {
	e, ok := st.(store.Exister)
	if !ok {
		return nil
	}
	switch exists, err := e.Exists(ctx); {
	case err != nil:
		return err
	case !exists:
		return fmt.Errorf("store %s: the directory does not exist: nothing was ever backed up there (check --store)", st)
	}
	return nil
}

// listChainOf is chain c as list shows it, its objects read through their
// checksums with check. A chain whose identity cannot be read is shown
// without it.
func listChainOf(ctx context.Context, st store.Store, c snapshot.Chain, codec snapshot.Codec, check bool) (view.Chain, error) {
	out, _ := view.Read(ctx, st, c, restore.Speed{})
	if check && out.Problem == "" {
		var err error
		if out.Problem, err = damage(ctx, st, c, codec); err != nil {
			return view.Chain{}, err
		}
	}
	return out, nil
}

// views are every snapshot shown, to be told their locks.
func (r *listResult) views() []*api.SnapshotView {
	var views []*api.SnapshotView
	for i := range r.Chains {
		views = append(views, &r.Chains[i].Full)
		for j := range r.Chains[i].Deltas {
			views = append(views, &r.Chains[i].Deltas[j])
		}
	}
	return views
}

// probeWriteOnce asks the store whether it refuses deletes.
func probeWriteOnce(ctx context.Context, st store.Store, views []*api.SnapshotView) *writeOnceProbe {
	p, err := snapshot.ProbeProtection(ctx, st)
	w := &writeOnceProbe{DeletesRefused: p.DeletesRefused, Probe: p.Probe, Error: errString(err), LockedSnapshots: lockedViews(views)}
	switch {
	case err != nil:
		w.said = "unknown: " + err.Error()
	case p.DeletesRefused:
		w.said = "yes: the store refused to delete " + p.Probe
	case w.LockedSnapshots > 0:
		// Per-object locks (--lock-for) hold on what the backups wrote;
		// this command's probe had none.
		w.said = fmt.Sprintf("partly: the store deleted %s, written without a lock: the bucket has no default lock, "+
			"and %d of %d snapshots carry a lock of their own (--lock-for); give list the --lock-for the backups use to probe as they write",
			p.Probe, w.LockedSnapshots, len(views))
	default:
		w.said = "no: the store deleted " + p.Probe + "; nothing locks what it holds"
	}
	return w
}

// table prints the chains a row per snapshot, then the timelines and the
// write-once answer.
func (r listResult) table(w *tabwriter.Writer) {
	// The lock's column only where the store tells of one, so the table
	// of an unlocked store stays as it was.
	lockCol, lockHead := func(api.SnapshotView) string { return "" }, ""
	// Every row has every column, so the table stays aligned across
	// chains.
	blank := "\t\t\t\t\t"
	if r.locked {
		lockHead, blank = "LOCKED UNTIL\t", blank+"\t"
		lockCol = func(v api.SnapshotView) string {
			if v.LockedUntil.IsZero() {
				return "-\t"
			}
			return v.LockedUntil.UTC().Format(lockTime) + "\t"
		}
	}
	fmt.Fprintln(w, "TIMELINE\tCHAIN\tCLUSTER\tKIND\tREVISIONS\tSIZE\tAGE\tCODEC\t"+lockHead+"KEY")
	for i, c := range r.Chains {
		cluster := cmp.Or(c.ClusterID, "-")
		for _, v := range append([]api.SnapshotView{c.Full}, c.Deltas...) {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d-%d\t%s\t%s\t%s\t%s%s\n", c.Timeline, i+1, cluster, v.Kind, v.StartRevision, v.LastRevision,
				size(v.Size), age(r.now.Sub(v.Created)), codecOf(v), lockCol(v), v.Key)
		}
		if c.Logical != nil {
			fmt.Fprintf(w, "%s\t%d\t%s\t~%slogical full of a datastore behind etcd's API (%s): %s\n", c.Timeline, i+1, cluster, blank,
				c.Source, strings.Join(c.Logical.Limits, "; "))
		}
		if c.Pin != nil {
			label := ""
			if c.Pin.Label != "" {
				label = " " + strconv.Quote(c.Pin.Label)
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t~%spinned%s by %s, %s ago: kept whatever the retention\n", c.Timeline, i+1, cluster, blank,
				label, c.Pin.By, age(r.now.Sub(c.Pin.Created)))
		}
		if c.Problem != "" {
			fmt.Fprintf(w, "%s\t%d\t%s\t!%s%s\n", c.Timeline, i+1, cluster, blank, c.Problem)
		} else {
			fmt.Fprintf(w, "%s\t%d\t%s\t~%srestores in about %s\n", c.Timeline, i+1, cluster, blank, time.Duration(c.EstimatedRestore*float64(time.Second)).Round(100*time.Millisecond))
		}
	}
	if len(r.Timelines) > 1 {
		// Without tabs: the legend is no part of the table.
		_ = w.Flush()
		fmt.Fprintln(w)
		for _, t := range r.Timelines {
			fmt.Fprintln(w, timelineLine(t))
		}
	}
	if r.WriteOnce != nil {
		_ = w.Flush()
		fmt.Fprintln(w, "\nwrite-once: "+r.WriteOnce.said)
	}
}

// damage reads each object of the chain through its checksum and says
// which do not hold; an error only when reading could not be tried.
func damage(ctx context.Context, st store.Store, c snapshot.Chain, codec snapshot.Codec) (string, error) {
	var bad []string
	for _, s := range c.Snapshots() {
		var err error
		if s.Kind == snapshot.KindFull {
			// As a restore checks it: its database holds its name's revision.
			err = snapshot.CheckFull(ctx, st, s, codec, "")
		} else {
			var rc io.ReadCloser
			if rc, err = snapshot.Open(ctx, st, s, codec); err == nil {
				_, err = io.Copy(io.Discard, rc)
				_ = rc.Close()
			}
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return "", ctx.Err()
		default:
			bad = append(bad, err.Error())
		}
	}
	return strings.Join(bad, "; "), nil
}

// lockedViews counts the snapshots whose lock has not ended.
func lockedViews(views []*api.SnapshotView) int {
	n := 0
	for _, v := range views {
		if v.LockedUntil.After(time.Now()) {
			n++
		}
	}
	return n
}

// lockTime is how a lock's end is shown: to the second, in UTC.
const lockTime = time.RFC3339

// lockedUntil asks the store when each shown snapshot's write-once lock
// ends, a few at a time, and says whether any is locked.
func lockedUntil(ctx context.Context, st store.Store, views []*api.SnapshotView) (bool, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, v := range views {
		g.Go(func() error {
			until, err := store.LockedUntil(gctx, st, v.Key)
			if errors.Is(err, store.ErrNotFound) {
				// Deleted since the listing: retention's doing.
				return nil
			}
			v.LockedUntil = until
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	return slices.ContainsFunc(views, func(v *api.SnapshotView) bool { return !v.LockedUntil.IsZero() }), nil
}

func codecOf(v api.SnapshotView) string {
	c := v.Compression
	if c == "" {
		c = "none"
	}
	if v.Encrypted {
		c += "+age"
	}
	return c
}

// timelineLine says what a timeline is, where it forked and why.
func timelineLine(t api.TimelineView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "timeline %s", t.ID)
	if t.Newest {
		b.WriteString(" (newest: restores, time travel and verify read it unless given --timeline)")
	}
	switch {
	case t.SetAside:
		b.WriteString(": not one of the store's timelines")
	case t.ID == snapshot.FirstTimeline:
		b.WriteString(": the store's first")
	case t.Parent == "":
	case t.ForkRevision > 0:
		fmt.Fprintf(&b, ": forked from %s at revision %d", t.Parent, t.ForkRevision)
	default:
		fmt.Fprintf(&b, ": begun after %s, sharing none of its past", t.Parent)
	}
	if !t.Began.IsZero() {
		fmt.Fprintf(&b, ", %s", t.Began.Format(time.RFC3339))
	}
	if t.ClusterID != "" {
		fmt.Fprintf(&b, ", cluster %s", t.ClusterID)
	}
	if t.Reason != "" {
		fmt.Fprintf(&b, ": %s", t.Reason)
	}
	return b.String()
}

// age is a duration for people; a time ahead of this machine's clock says
// so rather than show a negative age.
func age(d time.Duration) string {
	if d < -time.Second {
		return "in " + age(-d) + " (clock ahead)"
	}
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
