package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/compact"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// target is the --timeline, --revision and --time flags.
type target struct {
	timeline string
	revision int64
	at       string
}

func (t *target) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.timeline, "timeline", "", "read the past of this timeline (list shows them; default: the newest)")
	cmd.Flags().Int64Var(&t.revision, "revision", 0, "restore the state at this revision (default: the latest)")
	cmd.Flags().StringVar(&t.at, "time", "", "restore the state as of this time (RFC 3339, e.g. 2026-11-29T10:00:00Z)")
}

func (t *target) target(cmd *cobra.Command) (restore.Target, error) {
	out := restore.Target{Timeline: t.timeline}
	// Given, 0 is a mistake, not "the latest".
	given := cmd.Flags().Changed("revision")
	if t.revision != 0 && t.at != "" {
		return out, cli.Usage(errors.New("--revision and --time exclude each other"))
	}
	if t.revision < 0 || given && t.revision == 0 {
		return out, cli.Usage(fmt.Errorf("--revision %d: a revision is a positive number (leave it out for the latest)", t.revision))
	}
	out.Revision = t.revision
	if t.at != "" {
		at, err := time.Parse(time.RFC3339, t.at)
		if err != nil {
			return out, cli.Usage(fmt.Errorf("--time %q: %w", t.at, err))
		}
		out.Time = at
	}
	return out, nil
}

// revisionBump is --revision-bump: a number, auto for restore's estimate
// (Options.SafeRevision), 0 to keep the backup's revision
// (Options.KeepRevision); unset, restore's default.
type revisionBump struct{ opts *restore.Options }

func (b *revisionBump) String() string {
	switch {
	case b.opts == nil:
		return ""
	case b.opts.SafeRevision:
		return "auto"
	case b.opts.KeepRevision:
		return "0"
	case b.opts.RevisionBump == 0:
		return ""
	}
	return strconv.FormatUint(b.opts.RevisionBump, 10)
}

func (b *revisionBump) Set(s string) error {
	if s == "auto" {
		b.opts.RevisionBump, b.opts.SafeRevision, b.opts.KeepRevision = 0, true, false
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("a number of revisions, or auto")
	}
	b.opts.RevisionBump, b.opts.SafeRevision, b.opts.KeepRevision = n, false, n == 0
	return nil
}

func (b *revisionBump) Type() string { return "auto|N" }

// restoreRun is restore's flags and what it does with them.
type restoreRun struct {
	t      target
	opts   restore.Options
	follow struct {
		on                 bool
		poll, catchUpAfter time.Duration
	}
	tn       tenantFlags
	etcdutl  etcdutlFlags
	ifNeeded bool
	// bundle is the directory the chain's restore bundle goes into.
	bundle string
}

func restoreCmd(g *globals) *cobra.Command {
	var r restoreRun
	cmd := &cobra.Command{
		Use:   "restore (--data-dir DIR | --prefix P --to ENDPOINTS) [--revision R | --time T | --follow]",
		Short: "Rebuild a member's data dir from the backups; an existing data dir is moved aside",
		Long: `Rebuild a member's data dir from the backups; an existing data dir is moved aside.

With --follow, restore keeps a warm standby: the latest chain is restored once into
DIR.standby, and every new delta is replayed into it as it lands. On SIGTERM or SIGINT
the standby's state is made a member's data dir at DIR, as a plain restore would, and the
standby stays: run it again to go on following. A follower that is killed resumes
where it stood, without downloading the full snapshot again.

With --prefix, only a tenant's keys are restored: into a data dir of their own (their
last revisions and their leases, every other key left out), or with --to into a live
cluster, where each key is written in a transaction guarded on its mod revision as read,
so a concurrent writer is never overwritten. --to is a dry run until --apply; --replace
also deletes the live keys under the prefix that the past did not hold; --rename P=Q
writes the keys under another prefix.

With --if-needed, restore is an init step: it restores only when the member's start-up
would (the data dir is missing or damaged and the store holds backups), and leaves a sound
data dir, or a store without backups, as it is. With --storage-provider, restore takes
etcdbrctl restore's flags instead ("etcd-backup restore --storage-provider= --help").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return r.run(cmd, g) },
	}
	r.t.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&r.opts.Member.DataDir, "data-dir", "", "the member's data dir to build")
	f.StringVar(&r.opts.WorkDir, "work-dir", "", "where downloaded deltas wait to be replayed (default: beside the data dir)")
	f.StringVar(&r.opts.Member.WALDir, "wal-dir", "", "etcd's wal-dir, when the member keeps its WAL outside the data dir: the WAL is built there (an old one moved aside)")
	f.StringVar(&r.opts.Member.Name, "name", member.DefaultName, "the member's name")
	f.StringSliceVar(&r.opts.Member.PeerURLs, "peer-urls", []string{member.DefaultPeerURL}, "the member's advertised peer URLs")
	f.StringVar(&r.opts.Member.InitialCluster, "initial-cluster", "", "the new cluster's --initial-cluster (default: this member alone)")
	f.StringVar(&r.opts.Member.Token, "initial-cluster-token", member.DefaultToken, "the new cluster's token")
	cli.Release(f, &r.opts.Release, "etcd-version", "the etcd release that is to start the data dir (3.5, 3.6 or 3.7), whichever release the backups' cluster ran (default "+restore.Module.MinorString()+")")
	f.Var(&revisionBump{opts: &r.opts}, "revision-bump",
		"raise the restored revision by N, or with auto past any the cluster may have served that the backups do not hold, and mark it compacted, so clients never see it go back; "+
			"0 keeps the backup's (default: auto when the store's backups reach past the revision restored, so the cluster's own backups there sort after them, else 0)")
	f.IntVar(&r.opts.Read.Concurrency, "concurrency", 4, "parallel downloads")
	f.DurationVar(&r.opts.Read.UnknownLeaseTTL, "unknown-lease-ttl", time.Hour,
		"the TTL granted to leases of keys put after the full whose deltas do not record it (etcd-backup-restore's, older etcdkit's); 0: restore those keys without a lease")
	cli.KeepMovedAside(f, &r.opts.KeepMovedAside)
	f.StringVar(&r.bundle, "bundle", "", "also write the restore bundle of the chain restored (serve --bundle: the kube-apiserver's encryption keys, the PKI) into this directory, empty or new, by the paths they were taken from")
	f.BoolVar(&r.ifNeeded, "if-needed", false, "restore only when the member's start-up would: the data dir is missing or damaged and the store holds backups (an init container's step); "+
		"a valid data dir, or no backups, is left as it is and the command exits 0")
	f.BoolVar(&r.follow.on, "follow", false, "keep a warm standby: replay each new delta as it lands, and build the data dir on SIGTERM")
	f.DurationVar(&r.follow.poll, "poll", time.Second, "with --follow: how often the store is listed for new snapshots")
	f.DurationVar(&r.follow.catchUpAfter, "catch-up-after", 30*time.Second,
		"with --follow: how long the deltas may stop short of a newer full snapshot before the standby is built again from it")
	// etcdutl snapshot restore's names, typed by habit.
	cli.Alias(f, "peer-urls", "initial-advertise-peer-urls", "", "etcdutl")
	cli.Alias(f, "revision-bump", "bump-revision", "", "etcdutl")
	f.BoolVar(&r.etcdutl.markCompacted, "mark-compacted", false, "etcdutl's flag of --bump-revision: a raised revision is always marked compacted")
	f.BoolVar(&r.etcdutl.skipHashCheck, "skip-hash-check", false, "etcdutl's flag: refused, every snapshot's integrity is checked")
	r.tn.flags(cmd)
	g.secondaryFlag(cmd)
	return cmd
}

// check refuses flags that do not go together, and fills the options the
// flags give.
func (r *restoreRun) check(cmd *cobra.Command) error {
	if r.opts.Member.DataDir == "" {
		return cli.Usage(errors.New("--data-dir is required (or --prefix P --to ENDPOINTS for a tenant's keys in a live cluster)"))
	}
	r.opts.Prefix, r.opts.Rename = r.tn.prefix, r.tn.rename
	var err error
	if r.opts.Read.Target, err = r.t.target(cmd); err != nil {
		return err
	}
	switch {
	case r.opts.Read.UnknownLeaseTTL < 0:
		return cli.Usage(errors.New("--unknown-lease-ttl is a duration of 0 or more"))
	case r.opts.Read.UnknownLeaseTTL == 0:
		r.opts.Read.UnknownLeaseTTL = restore.NoLease
	}
	if err := errors.Join(cli.AtLeast("keep-moved-aside", int64(r.opts.KeepMovedAside), -1),
		cli.AtLeast("concurrency", int64(r.opts.Read.Concurrency), 1)); err != nil {
		return err
	}
	if r.follow.on && (r.t.revision != 0 || r.t.at != "") {
		return cli.Usage(errors.New("--follow keeps the newest state: it takes no --revision or --time"))
	}
	return nil
}

func (r *restoreRun) run(cmd *cobra.Command, g *globals) error {
	ctx := cmd.Context()
	if err := r.etcdutl.check(cmd); err != nil {
		return err
	}
	if err := r.tn.check(cmd, r.opts.Member.DataDir, r.follow.on); err != nil {
		return err
	}
	if len(r.tn.to) > 0 {
		return r.tn.run(cmd, g, r.t)
	}
	if err := r.check(cmd); err != nil {
		return err
	}
	if r.ifNeeded {
		return r.restoreIfNeeded(ctx, cmd, g)
	}
	// A restore replays as a compaction does: its heap stays flat in the
	// revisions under the same limit, where without one it grows to twice
	// what is live (bench/README.md, the growth rows).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(compact.ReplayMemory)
	}
	st, p, err := g.source(ctx, &r.opts.Read)
	if err != nil {
		return err
	}
	bundleDir, err := r.bundles()
	if err != nil {
		return err
	}
	var res restore.Result
	if r.follow.on {
		// The standby follows the first site, and each poll reads the
		// second while the first has no whole chain.
		res, err = restore.Follow(ctx, st, restore.FollowOptions{Restore: r.opts, Poll: r.follow.poll, CatchUpAfter: r.follow.catchUpAfter,
			Applied: func(s restore.Standby) {
				p.Done()
				g.log.Info("standby", "revision", s.Revision, "full", s.Full, "delta", s.Delta, "replayed", s.Revisions, "resumed", s.Resumed)
			}})
	} else {
		res, err = restore.Restore(ctx, st, r.opts)
	}
	p.Done()
	if err != nil {
		return err
	}
	if !cmd.Flags().Changed("name") && !cmd.Flags().Changed("initial-cluster") {
		g.log.Warn("restore: the data dir is built for etcd's default member: start etcd with these, or restore again with --name, --peer-urls and --initial-cluster-token as the member starts",
			"name", r.opts.Member.Name, "peer-urls", strings.Join(r.opts.Member.PeerURLs, ","), "initial-cluster-token", r.opts.Member.Token)
	}
	out := restoreResultOf(r.opts, res)
	if r.bundle != "" {
		if out.Bundle, err = r.extractBundle(ctx, st, bundleDir, res); err != nil {
			return fmt.Errorf("the data dir is restored; its bundle is not: %w", err)
		}
	}
	return g.print(out, out.table)
}

// bundles checks, before anything is restored, that --bundle can be
// written: an empty or new directory, not with --follow or a prefix.
func (r *restoreRun) bundles() (string, error) {
	if r.bundle == "" {
		return "", nil
	}
	if r.follow.on || r.opts.Prefix != "" {
		return "", cli.Usage(errors.New("--bundle goes with a whole restore, not --follow or --prefix"))
	}
	entries, err := os.ReadDir(r.bundle)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("--bundle: %w", err)
	case len(entries) > 0:
		return "", cli.Usage(fmt.Errorf("--bundle %s holds files: give an empty or new directory, then put the files in place", r.bundle))
	}
	return r.bundle, nil
}

// extractBundle writes the bundle the restored chain's full takes.
func (r *restoreRun) extractBundle(ctx context.Context, st store.Store, dir string, res restore.Result) (*bundleView, error) {
	bundles, err := snapshot.ListBundles(ctx, st)
	if err != nil {
		return nil, err
	}
	b, ok := snapshot.BundleFor(bundles, res.Chain.Full)
	if !ok {
		return nil, fmt.Errorf("no restore bundle was written beside %s or before it (serve --bundle writes them)", res.Chain.Full.Key)
	}
	files, err := snapshot.ExtractBundle(ctx, st, b, r.opts.Read.Codec, dir)
	if err != nil {
		return nil, err
	}
	v := &bundleView{Key: b.Key, Dir: dir, Files: files}
	if !b.Full.Created.Equal(res.Chain.Full.Created) || b.Full.LastRevision != res.Chain.Full.LastRevision {
		v.WrittenBefore = b.Full.Name()
	}
	return v, nil
}

// bundleView is the restore bundle a restore wrote.
type bundleView struct {
	Key   string   `json:"key"`
	Dir   string   `json:"dir"`
	Files []string `json:"files"`
	// WrittenBefore is the earlier full the bundle was written beside,
	// "" when it is the restored chain's own.
	WrittenBefore string `json:"written_before,omitempty"`
}

// restoreResult is what restore prints.
type restoreResult struct {
	AuthRestored         bool              `json:"auth_restored"`
	Bundle               *bundleView       `json:"bundle,omitempty"`
	Beyond               []timelineEndView `json:"beyond"`
	DataDir              string            `json:"data_dir"`
	Deltas               int               `json:"deltas"`
	DroppedLeases        int64             `json:"dropped_leases"`
	EtcdVersion          string            `json:"etcd_version"`
	Full                 string            `json:"full"`
	GrantedLeases        int64             `json:"granted_leases"`
	GuessedLeases        int64             `json:"guessed_leases"`
	MovedAside           string            `json:"moved_aside"`
	Prefix               string            `json:"prefix"`
	Replayed             int64             `json:"replayed"`
	Revision             int64             `json:"revision"`
	RevisionBump         uint64            `json:"revision_bump"`
	RolesLeftOut         []string          `json:"roles_left_out"`
	UsersLeftOut         []string          `json:"users_left_out"`
	UsersWithoutPassword []string          `json:"users_without_password"`
	WALMovedAside        string            `json:"wal_moved_aside"`

	opts restore.Options
	res  restore.Result
}

// timelineEndView is a restore.Result's Beyond for JSON.
type timelineEndView struct {
	LastRevision int64  `json:"last_revision"`
	Timeline     string `json:"timeline"`
}

func restoreResultOf(opts restore.Options, res restore.Result) restoreResult {
	out := restoreResult{AuthRestored: res.AuthRestored, Beyond: []timelineEndView{}, DataDir: opts.Member.DataDir, Deltas: len(res.Chain.Deltas),
		DroppedLeases: res.DroppedLeases, EtcdVersion: cmp.Or(opts.Release, restore.Module).MinorString(), Full: res.Chain.Full.Key,
		GrantedLeases: res.GrantedLeases, GuessedLeases: res.GuessedLeases, MovedAside: res.MovedAside, Prefix: opts.Prefix,
		Replayed: res.Revisions, Revision: res.Revision, RevisionBump: res.RevisionBump, RolesLeftOut: nonNil(res.RolesLeftOut),
		UsersLeftOut: nonNil(res.UsersLeftOut), UsersWithoutPassword: nonNil(res.UsersWithoutPassword), WALMovedAside: res.WALMovedAside,
		opts: opts, res: res}
	for _, e := range res.Beyond {
		out.Beyond = append(out.Beyond, timelineEndView{LastRevision: e.LastRevision, Timeline: e.Timeline.ID})
	}
	return out
}

// nonNil is s, or an empty list for JSON's [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (o restoreResult) table(w *tabwriter.Writer) {
	opts, res := o.opts, o.res
	fmt.Fprintf(w, "restored\t%s\nfor etcd\t%s\nrevision\t%d\nfrom\t%s and %d deltas (%d revisions replayed)\n", opts.Member.DataDir, o.EtcdVersion, res.Revision, res.Chain.Full.Key, len(res.Chain.Deltas), res.Revisions)
	if opts.Prefix != "" {
		under := ""
		if opts.Rename != (restore.Rename{}) {
			under = fmt.Sprintf(", renamed %s → %s", opts.Rename.From, opts.Rename.To)
		}
		fmt.Fprintf(w, "keys\tonly those under %s%s, each at its last revision, with its lease; every other key left out\n", opts.Prefix, under)
		if n := len(res.UsersLeftOut) + len(res.RolesLeftOut); n > 0 {
			fmt.Fprintf(w, "users and roles left out\tusers %s, roles %s: granted more than %s\n",
				cmp.Or(strings.Join(res.UsersLeftOut, ", "), "none"), cmp.Or(strings.Join(res.RolesLeftOut, ", "), "none"), opts.Prefix)
		}
	}
	if end := lastCreated(res); !opts.Read.Target.Time.IsZero() && end.Before(opts.Read.Target.Time) {
		fmt.Fprintf(w, "backups end\t%s, before --time: writes after it are in no backup\n", end.UTC().Format(time.RFC3339))
	}
	for _, b := range res.Beyond {
		fmt.Fprintf(w, "note\t%s holds backups up to revision %d, past the %d restored here from the newest timeline, %s (list says why it began): --timeline %s restores from it\n",
			b.Timeline, b.LastRevision, res.Revision, res.Followed.ID, b.Timeline.ID)
	}
	o.tableNotes(w)
}

// tableNotes are the lines of what the restore changed beside the keys.
func (o restoreResult) tableNotes(w *tabwriter.Writer) {
	res := o.res
	if res.RevisionBump > 0 {
		fmt.Fprintf(w, "revision bump\t%d (the member starts at revision %d, marked compacted)\n", res.RevisionBump, res.Revision+int64(res.RevisionBump))
	}
	if res.MovedAside != "" {
		fmt.Fprintf(w, "old data dir\t%s\n", res.MovedAside)
	}
	if b := o.Bundle; b != nil {
		fmt.Fprintf(w, "bundle\t%d files from %s into %s: put them in place before the kube-apiserver starts\n", len(b.Files), b.Key, b.Dir)
		if b.WrittenBefore != "" {
			fmt.Fprintf(w, "bundle's age\twritten beside %s, before the full restored: the fulls since found the files unchanged, or failed to write theirs (the sidecar's etcdkit_snapshot_failures_total{kind=\"bundle\"} and log say which)\n", b.WrittenBefore)
		}
	}
	if res.WALMovedAside != "" {
		fmt.Fprintf(w, "old WAL\t%s\n", res.WALMovedAside)
	}
	if n := res.GrantedLeases + res.GuessedLeases; n > 0 {
		fmt.Fprintf(w, "leases granted again\t%d (%d with the TTL recorded, %d with --unknown-lease-ttl)\n", n, res.GrantedLeases, res.GuessedLeases)
	}
	if res.AuthRestored {
		fmt.Fprintf(w, "users and roles\tas the deltas recorded them, changed since the full\n")
	}
	if len(res.UsersWithoutPassword) > 0 {
		fmt.Fprintf(w, "users without a password\t%s (the full snapshot holds no password of theirs: set one with etcdctl user passwd)\n", strings.Join(res.UsersWithoutPassword, ", "))
	}
	if res.DroppedLeases > 0 {
		fmt.Fprintf(w, "keys without their lease\t%d (no TTL recorded and --unknown-lease-ttl=0)\n", res.DroppedLeases)
	}
}

// etcdutlFlags are etcdutl snapshot restore's flags that etcdkit takes to
// refuse what it will not do, with the reason.
type etcdutlFlags struct{ markCompacted, skipHashCheck bool }

func (e etcdutlFlags) check(cmd *cobra.Command) error {
	// A bump of 0 raises nothing: it is no bump.
	bumped := (cmd.Flags().Changed("revision-bump") || cmd.Flags().Changed("bump-revision")) && cmd.Flags().Lookup("revision-bump").Value.String() != "0"
	switch {
	case e.skipHashCheck:
		return cli.Usage(errors.New("--skip-hash-check: etcd-backup restore checks every snapshot it reads and restores none that fails (etcdutl skips the check for a db file copied out of a data dir, which holds none; a backup always does): restore an earlier --revision, or from the other site with --secondary-store"))
	case cmd.Flags().Changed("mark-compacted") && !e.markCompacted && bumped:
		return cli.Usage(errors.New("--mark-compacted=false: a raised revision is always marked compacted, so that a client watching from a revision below it is told to read again instead of missing the writes between"))
	case e.markCompacted && !bumped:
		return cli.Usage(errors.New("--mark-compacted marks a raised revision compacted: give --bump-revision N (N > 0, or auto) too, as etcdutl asks"))
	}
	return nil
}

// lastCreated is when the newest object of the chain restored was written.
func lastCreated(res restore.Result) time.Time {
	if n := len(res.Chain.Deltas); n > 0 {
		return res.Chain.Deltas[n-1].Created
	}
	return res.Chain.Full.Created
}
