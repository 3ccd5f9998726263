package restore

import (
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/internal/datadir"
	"github.com/etcdkit/etcdkit/internal/etcdstorage"
	"github.com/etcdkit/etcdkit/internal/frames"
	"github.com/etcdkit/etcdkit/internal/scratch"
	"github.com/etcdkit/etcdkit/member"
	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// ErrNoSpace means the file system of the data dir cannot hold the work.
var ErrNoSpace = errors.New("not enough free disk space")

// Target picks the chain and where the replay stops. The zero value is
// the newest state the store holds, on its newest timeline.
type Target struct {
	// Timeline is the timeline whose past is restored ("": the newest).
	Timeline string
	// Revision, when not 0, is the last revision restored.
	Revision int64
	// Time, when not zero, restores the state as of then: events received
	// after it are not applied.
	Time time.Time
}

// NoLease, as ReadOptions.UnknownLeaseTTL, restores the keys whose lease
// no delta recorded a TTL of without a lease (any negative value does).
const NoLease time.Duration = -1

// ReadOptions say what to read from the store and how. The zero value
// reads the latest chain, four objects at a time.
type ReadOptions struct {
	Target Target
	// Chain, when set, is restored instead of the chain Target picks
	// from a listing of the store: a caller that listed and checked the
	// catalog already (a start-up) hands its choice down.
	Chain *snap.Chain
	// Secondary is a second site holding copies of the store's snapshots
	// (sidecar.BackupOptions.Secondary writes them). Every read honours it: the
	// chain is read from it when the store cannot be listed, holds no
	// backups or has a broken newest chain while the second's is whole
	// (Site); a Restore whose backup read is damaged restores from the
	// other site's copies, to the revision the damaged chain held (a copy
	// that lags fails rather than restore an older state in silence); a
	// Follow reads whichever is whole at each poll.
	// A Replay (a verification, a drill) picks a site but does not fall
	// back on damage: it is there to find it. nil: the store alone.
	Secondary store.Store
	// Codec decrypts encrypted snapshots (its Identities).
	Codec snap.Codec
	// Concurrency of downloads. Default 4.
	Concurrency int
	// Ahead bounds the deltas downloaded and not yet replayed. Default 8.
	Ahead int
	// Member, when set, is the ID (hex, MemberID) of the member the
	// restore is for, and MemberName its name: the full snapshot must name
	// it among its members by either, or the chain is another cluster's
	// (snapshot.ErrOtherCluster). The name alone suffices because the ID
	// etcd gave a member changes with a rejoin, and its peer URLs with a
	// move to TLS, while its backups stay its cluster's. An automated
	// restore sets them; an operator's restores what it is told.
	Member, MemberName string
	// UnknownLeaseTTL is granted to the leases of keys put after the full
	// snapshot whose deltas do not record a TTL (written before etcdkit
	// recorded them, or by etcd-backup-restore), so that those keys expire
	// instead of living forever. Default one hour: the TTL Kubernetes gives
	// its Events, the bulk of such keys, and longer than the leases of
	// locks and elections, whose owners keep them alive anyway, so no key
	// goes sooner than it would have. NoLease restores those keys without
	// a lease.
	UnknownLeaseTTL time.Duration
	// Progress, when set, is called as the work advances, from one
	// goroutine at a time.
	Progress func(Progress)
	// Logger: nil discards.
	Logger *slog.Logger
	// unmap: see replayer.unmap (a compaction sets it).
	unmap bool
}

func (s ReadOptions) withDefaults() ReadOptions {
	if s.Concurrency <= 0 {
		s.Concurrency = 4
	}
	if s.Ahead <= 0 {
		s.Ahead = 8
	}
	if s.UnknownLeaseTTL == 0 {
		s.UnknownLeaseTTL = time.Hour
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s
}

// Options configures Restore. Member.DataDir is required; the zero value of
// the rest restores the latest state into a single-member cluster named
// "default" on http://localhost:2380.
type Options struct {
	// Read says which chain to restore and how to read it.
	Read ReadOptions
	// Member is the member the data dir is for; its DataDir is required
	// and etcd's defaults fill in the rest (member.Spec.WithDefaults). An
	// existing data dir is moved aside to DataDir.bak-<time>, never
	// deleted; one a running etcd holds is refused (datadir.ErrInUse).
	// With a WALDir the WAL goes there, not into the data dir, and an
	// existing one is moved aside as the data dir is.
	Member member.Spec
	// WorkDir is where downloaded deltas wait to be replayed. Default:
	// beside the data dir, with the data dir being built.
	WorkDir string
	// KeepMovedAside is how many moved-aside data dirs are kept beside
	// DataDir, the one this restore makes included; older ones are
	// removed if etcdkit built them and etcd never wrote to them
	// (datadir.Built), never otherwise. Default 1; negative keeps them all.
	KeepMovedAside int
	// RevisionBump raises the restored revision by this much and marks it
	// compacted, so clients that saw revisions past the backup never see
	// the revision go back. 0: SafeBump's estimate when the store's
	// backups reach past the revision restored (a restore to an earlier
	// point, or of a timeline another outgrew), no bump otherwise.
	//
	// The restored cluster always starts past every revision the store's
	// backups name, unless KeepRevision: its backups on the same store
	// begin a timeline, and a reader that knows no timelines
	// (etcd-backup-restore takes the full snapshot with the highest
	// revision and every delta named past it) restores them right only
	// if they sort after everything the older timelines hold. A
	// RevisionBump too small for that is refused (ErrBumpTooSmall).
	RevisionBump uint64
	// SafeRevision, with RevisionBump 0, bumps by SafeBump's estimate of
	// the revisions the cluster made that the store does not hold, even
	// for a restore of the store's newest revision. Every automated
	// restore sets it: the cluster it replaces served those revisions to
	// watchers (Kubernetes' among them) that would stall or miss events on
	// a revision that goes back.
	SafeRevision bool
	// KeepRevision restores the backup's revision as it is, with no bump,
	// even when the store's backups reach past it: the cluster must then
	// back up to another store (or prefix), or etcd-backup-restore
	// restores that store wrong. It overrides RevisionBump and
	// SafeRevision.
	KeepRevision bool
	// Prefix restores only the keys under it (a tenant's, for a cluster
	// of its own): the data dir holds each at its last revision, with the
	// leases they are attached to, compacted at the restored revision.
	// "": every key, with its history since the full.
	Prefix string
	// Rename writes the keys under Prefix under another prefix.
	Rename Rename
	// Release is the etcd release that is to start the data dir (3.5,
	// 3.6 or 3.7): the restore writes what it starts on, whichever
	// release the backups' cluster ran. Zero: Module.
	Release etcdversion.Version
	// Now names the moved-aside data dir. Default time.Now.
	Now func() time.Time
}

// Progress is where a restore is.
type Progress struct {
	// BytesDownloaded of BytesTotal object bytes.
	BytesDownloaded, BytesTotal int64
	// Revisions replayed so far, of RevisionsTotal the chain's deltas
	// cover (up to the target).
	Revisions, RevisionsTotal int64
}

// Result reports a restore.
type Result struct {
	Chain snap.Chain
	// Revision is the revision the data dir holds (before any bump).
	Revision int64
	// RevisionBump is how much the restored revision was raised by.
	RevisionBump uint64
	// Revisions is how many revisions were replayed from deltas.
	Revisions int64
	// GrantedLeases counts leases granted after the full snapshot that
	// the restore granted again with the TTL their deltas recorded;
	// GuessedLeases those granted ReadOptions.UnknownLeaseTTL because no delta
	// recorded theirs. Their TTLs count from the restored member's start.
	GrantedLeases, GuessedLeases int64
	// DroppedLeases counts puts written without their lease: one granted
	// after the full snapshot whose TTL no delta recorded, with NoLease as
	// ReadOptions.UnknownLeaseTTL.
	DroppedLeases int64
	// AuthRestored says the users and roles are the deltas' (changed
	// since the full snapshot), not the full's. UsersWithoutPassword are
	// the users whose password the full does not hold (made since it):
	// etcd never tells a password, so they have none until one is set
	// (etcdctl user passwd); certificate authentication works meanwhile.
	AuthRestored         bool
	UsersWithoutPassword []string
	// UsersLeftOut and RolesLeftOut, of a restore of a Prefix: the users
	// and roles granted more than the prefix (another tenant's), which
	// the new cluster does not get. Root and its role stay.
	UsersLeftOut, RolesLeftOut []string
	// Beyond are the store's older timelines whose backups reach past the
	// revision restored, when the restore followed the newest timeline,
	// Followed, to its latest chain by default (snapshot.Catalog.Beyond).
	Followed snap.Timeline
	Beyond   []snap.TimelineEnd
	// ClusterID is the restored cluster's ID (hex), new with every restore:
	// etcd derives it from the initial cluster and its token.
	ClusterID string
	// MovedAside is where the previous data dir went, "" when there was
	// none; WALMovedAside where the previous wal-dir went.
	MovedAside, WALMovedAside string
	Download, Replay, Total   time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Member.DataDir == "" {
		return o, errors.New("restore: no data dir given")
	}
	abs, err := filepath.Abs(o.Member.DataDir)
	if err != nil {
		return o, fmt.Errorf("restore: data dir %s: %w", o.Member.DataDir, err)
	}
	o.Member.DataDir = abs
	if o.Member.WALDir != "" {
		if o.Member.WALDir, err = filepath.Abs(o.Member.WALDir); err != nil {
			return o, fmt.Errorf("restore: wal-dir %s: %w", o.Member.WALDir, err)
		}
	}
	o.Member = o.Member.WithDefaults()
	if o.Release.IsZero() {
		o.Release = Module
	}
	if err := checkRelease(o.Release); err != nil {
		return o, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rename != (Rename{}) && o.Prefix == "" {
		return o, errors.New("restore: a rename needs a prefix: the keys to rename")
	}
	if err := o.Rename.Check(o.Prefix); err != nil {
		return o, fmt.Errorf("restore: %w", err)
	}
	o.Read = o.Read.withDefaults()
	// Before anything is downloaded: the member must fit its cluster.
	if err := o.member(0).Check(); err != nil {
		return o, fmt.Errorf("restore: %w", err)
	}
	return o, nil
}

// Chain picks and checks the chain a target asks for: gaps are an error
// before anything is downloaded.
func Chain(ctx context.Context, st store.Store, t Target) (snap.Chain, error) {
	chain, _, _, err := pick(ctx, st, t)
	return chain, err
}

// pick is Chain, and the store's latest chain and the catalog of the
// timeline it read.
func pick(ctx context.Context, st store.Store, t Target) (chain, latest snap.Chain, cat snap.Catalog, err error) {
	if t.Revision < 0 {
		return chain, latest, cat, fmt.Errorf("restore: revision %d: a revision is positive (0: the latest)", t.Revision)
	}
	if cat, err = snap.List(ctx, st); err != nil {
		return chain, latest, cat, err
	}
	if cat, err = cat.On(t.Timeline); err != nil {
		return chain, latest, cat, fmt.Errorf("restore from %v: %w", st, err)
	}
	latest, err = cat.Latest()
	switch {
	case t.Revision > 0:
		chain, err = cat.ContainingRevision(t.Revision)
	case !t.Time.IsZero():
		chain, err = cat.AsOf(t.Time)
	default:
		chain = latest
	}
	if err != nil {
		return chain, latest, cat, fmt.Errorf("restore from %v: %w", st, err)
	}
	chain, err = chain.Check()
	return chain, latest, cat, err
}

// Restore rebuilds a member's data dir from the store: the chain the
// target asks for is downloaded, its deltas replayed into the full
// snapshot's database with etcd's mvcc store, and the database made a
// member's data dir. All of it happens in a directory beside DataDir,
// which is renamed into place at the end: a failed or cancelled restore
// leaves the old data dir as it was.
func Restore(ctx context.Context, st store.Store, opts Options) (Result, error) {
	site := st
	if opts.Read.Chain == nil {
		site = Site(ctx, st, opts.Read)
	}
	res, err := restoreFrom(ctx, site, opts)
	other := opts.Read.Secondary
	if site != st {
		other = st
	}
	if err == nil || other == nil || other == site || !Damaged(err) {
		return res, err
	}
	if opts.Read.Logger != nil {
		opts.Read.Logger.Warn("restore: a backup on the site read is damaged; restoring from the other site's copies",
			"damaged", fmt.Sprint(site), "other", fmt.Sprint(other), "err", err)
	}
	// The other site's chain is found again: a chain handed down is the
	// first site's. A failed restore left the data dir as it was.
	opts.Read.Chain = nil
	if t := opts.Read.Target; t.Revision == 0 && t.Time.IsZero() && res.Chain.Full.Key != "" {
		// The copies must give what the damaged chain held: a second site
		// that lags would otherwise restore an older state in silence.
		opts.Read.Target.Revision = res.Chain.LastRevision()
	}
	res2, err2 := restoreFrom(ctx, other, opts)
	if err2 != nil {
		return res, fmt.Errorf("%w; from the other site %v: %w", err, other, err2)
	}
	return res2, nil
}

// restoreFrom is Restore from one site.
func restoreFrom(ctx context.Context, st store.Store, opts Options) (Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	// latest is what SafeRevision estimates from: the caller's chain (one
	// that listed the store picked the latest), or the listing's.
	// newest is the newest revision the store's backups hold, on any
	// timeline: the restored cluster starts past it.
	var (
		chain, latest snap.Chain
		followed      snap.Timeline
		beyond        []snap.TimelineEnd
		newest        int64
	)
	if opts.Read.Chain != nil {
		chain, latest = *opts.Read.Chain, *opts.Read.Chain
	} else {
		var cat snap.Catalog
		if chain, latest, cat, err = pick(ctx, st, opts.Read.Target); err != nil {
			return Result{}, err
		}
		newest = cat.NewestRevision()
		if t := opts.Read.Target; t.Timeline == "" && t.Revision == 0 && t.Time.IsZero() {
			// The newest timeline's latest chain, by default: what the
			// older timelines hold past it is said, never passed over
			// in silence.
			followed, beyond = cat.Timeline, cat.Beyond(chain.LastRevision())
		}
	}
	for _, b := range beyond {
		opts.Read.Logger.Warn("restore: an older timeline's backups reach past the newest's latest chain, which this restore follows (give the timeline to restore from it)",
			"newest", followed.ID, "revision", chain.LastRevision(), "timeline", b.Timeline.ID, "its_last_revision", b.LastRevision)
	}
	parent := filepath.Dir(opts.Member.DataDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return Result{}, fmt.Errorf("restore: %w", err)
	}
	unlock, err := datadir.LockBuild(opts.Member.DataDir)
	if err != nil {
		return Result{}, fmt.Errorf("restore: %w", err)
	}
	defer unlock()
	// Held to the swap: an etcd running on the old data dir would keep
	// writing into it once moved aside, and those writes would be lost.
	release, err := datadir.Hold(opts.Member.DataDir, opts.Member.WALDir)
	if err != nil {
		return Result{}, fmt.Errorf("restore: %w", err)
	}
	defer release()
	if err := checkSpace(parent, chain); err != nil {
		return Result{}, err
	}
	// A scratch dir: what a killed restore left beside the data dir is
	// removed by the next one.
	work, drop, err := scratch.Dir(parent, filepath.Base(opts.Member.DataDir)+".tmp-")
	if err != nil {
		return Result{}, fmt.Errorf("restore: %w", err)
	}
	defer drop()

	// Every full, a plain one on this machine too, is decoded once and
	// its trailer checked on the way into the data dir's database, which
	// is replayed there and made a member where it lies: no copy of the
	// database is made, and bbolt opens no page before the trailer says
	// the file is whole (a damaged page can lead bbolt round a loop of
	// pages without end, allocating as it goes).
	out := filepath.Join(work, "data")
	db := dbPath(out)
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return Result{}, fmt.Errorf("restore: %w", err)
	}
	spool := work
	if opts.WorkDir != "" {
		dir, drop, err := scratch.Dir(opts.WorkDir, "etcdkit-restore-")
		if err != nil {
			return Result{}, fmt.Errorf("restore: work dir %s: %w", opts.WorkDir, err)
		}
		defer drop()
		spool = dir
	}
	res, r, err := replayChain(ctx, st, chain, db, spool, opts.Read, false)
	if err != nil {
		return res, olderChain(st, chain, err)
	}
	res.Followed, res.Beyond = followed, beyond
	if res.RevisionBump, err = opts.bump(latest, newest, res.Revision); err != nil {
		return res, err
	}
	if opts.Prefix != "" {
		if err := keepPrefix(ctx, r, db, res.Revision, opts.Prefix, opts.Rename, &res); err != nil {
			return res, fmt.Errorf("restore the keys under %q: %w", opts.Prefix, err)
		}
		r = nil
	}
	if err := finishInPlace(r, out, res.Revision, opts.member(res.RevisionBump)); err != nil {
		return res, fmt.Errorf("restore into %s: build the data dir: %w", opts.Member.DataDir, err)
	}
	// The last moment a cancel leaves everything as it was.
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	if err := install(ctx, st, opts, out, release, &res, latest, start); err != nil {
		return res, err
	}
	return res, nil
}

// keepPrefix makes the database a replay left at db hold the keys under
// prefix alone (renamed), as etcd would after deleting every other key
// and compacting at the replay's revision: the replay is closed, and the
// copy takes its place.
func keepPrefix(ctx context.Context, r *replayer, db string, at int64, prefix string, rename Rename, res *Result) error {
	if r != nil { // nil: a full alone, never opened
		if err := r.close(); err != nil {
			return err
		}
	}
	picked := db + ".prefix"
	pick := newKeyPick(prefix, rename)
	if err := compactCopy(ctx, db, picked, at, pick); err != nil {
		return err
	}
	res.UsersLeftOut, res.RolesLeftOut = pick.usersLeftOut, pick.rolesLeftOut
	return os.Rename(picked, db)
}

// install swaps the data dir built at out into opts.DataDir (the old one
// moved aside), records which chain the new cluster continues, prunes old
// moved-aside dirs and logs the result. release ends the hold on
// opts.DataDir once the swap is done.
func install(ctx context.Context, st store.Store, opts Options, out string, release func(), res *Result, latest snap.Chain, start time.Time) error {
	// Built from the backups: moved aside one day, it may be pruned.
	if err := datadir.MarkBuilt(out, "restore", opts.Now()); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	var err error
	if res.MovedAside, res.WALMovedAside, err = swapIn(out, opts.Member.DataDir, opts.Member.WALDir, opts.Now()); err != nil {
		return err
	}
	release()
	recordRestore(ctx, st, opts, res, latest)
	prune(opts, "restore", res.MovedAside, res.WALMovedAside)
	res.Total = time.Since(start)
	opts.Read.Logger.Info("restored", "data-dir", opts.Member.DataDir, "revision", res.Revision, "deltas", len(res.Chain.Deltas),
		"revisions", res.Revisions, "bump", res.RevisionBump, "leases_granted", res.GrantedLeases+res.GuessedLeases,
		"auth_restored", res.AuthRestored, "moved-aside", res.MovedAside, "took", res.Total.Round(time.Millisecond))
	if len(res.UsersWithoutPassword) > 0 {
		opts.Read.Logger.Warn("restore: users the full snapshot holds no password of have none: set one with etcdctl user passwd",
			"users", res.UsersWithoutPassword)
	}
	return nil
}

// ErrBumpTooSmall is a RevisionBump that leaves the restored cluster at a
// revision the store's backups already name.
var ErrBumpTooSmall = errors.New("the revision bump leaves the restored cluster behind the store's backups")

// bump is the revision bump of a data dir at revision rev, with newest the
// newest revision the store's backups hold (0: latest's): the one asked
// for, or SafeBump's estimate from the latest chain when SafeRevision
// asks for it or the store reaches past rev.
func (o Options) bump(latest snap.Chain, newest, rev int64) (uint64, error) {
	newest = max(newest, latest.LastRevision())
	// A tenant's keys make a cluster of their own, which the store's
	// uploader would refuse as another cluster's: it forks nothing here.
	behind := newest > rev && o.Prefix == ""
	switch {
	case o.KeepRevision:
		if behind {
			o.Read.Logger.Warn("restore: the revision is kept, behind the store's backups: back the restored cluster up to another store or prefix, or etcd-backup-restore restores that one wrong",
				"revision", rev, "store_newest", newest)
		}
		return 0, nil
	case o.RevisionBump != 0:
		if behind && rev+int64(min(o.RevisionBump, math.MaxInt64/2)) <= newest {
			return 0, fmt.Errorf("restore into %s: a bump of %d starts the cluster at revision %d, and the store's backups reach %d: %w; "+
				"bump by at least %d (or let the bump be estimated), so that its own backups sort after them, or keep the revision and back it up elsewhere",
				o.Member.DataDir, o.RevisionBump, rev+int64(o.RevisionBump), newest, ErrBumpTooSmall, newest-rev+1)
		}
		return o.RevisionBump, nil
	case !o.SafeRevision && !behind:
		return 0, nil
	}
	b := safeBump(latest, newest, rev, o.Now())
	why := "the revision is bumped past any the lost cluster may have served, and marked compacted"
	if behind {
		why = "the store's backups reach past the revision restored: it is bumped past them, and past any the cluster may have served since, and marked compacted"
	}
	o.Read.Logger.Info("restore: "+why,
		"revision", rev, "bump", b.Revisions, "store_newest", b.Newest, "peak_rate_per_s", math.Round(b.Rate),
		"since_newest_snapshot", b.Since.Round(time.Second))
	return b.Revisions, nil
}

// member is the new member opts describe, with its revision bump.
func (o Options) member(bump uint64) etcdstorage.Member {
	// The member is etcd's from now on: a backup of it is etcd's own, whose
	// revisions never skip.
	return etcdstorage.Member{Name: o.Member.Name, PeerURLs: o.Member.PeerURLs, InitialCluster: o.Member.InitialCluster, Token: o.Member.Token,
		Bump: bump, Release: o.Release, DropMeta: [][]byte{[]byte(snap.LogicalMarker)}}
}

// inPlace is the file of a chain that is a plain full snapshot alone on a
// local store: etcdutl can read it where it is.
// ErrDamaged is a backup whose content is not what its name says.
var ErrDamaged = errors.New("the backup is damaged")

// Damaged says whether err is a damaged object's: one whose checksum,
// compression or database does not hold.
func Damaged(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, ErrDamaged) || errors.Is(err, snap.ErrChecksum) || errors.Is(err, snap.ErrTruncated) || errors.Is(err, frames.ErrCorrupt) ||
		errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, zlib.ErrHeader) ||
		errors.Is(err, zlib.ErrChecksum) || errors.As(err, &corrupt) || errors.Is(err, io.ErrUnexpectedEOF)
}

// olderChain adds to a damaged object's error how to restore anyway: the
// chains before it are intact, and a restore picks one when the damaged
// object is out of the way or a revision below it is asked for.
func olderChain(st store.Store, chain snap.Chain, err error) error {
	if !Damaged(err) {
		return err
	}
	hint := fmt.Sprintf("the chain of %s cannot be restored whole: delete the damaged object or move it out of the store (%v), or where a lock keeps it take it out of the backups with "+snap.ExcludeMark+", and the previous chain is used; or restore an earlier state, below revision %d, from an older chain (etcd-backup restore --revision or --time; etcd-backup list shows the chains)",
		chain.Full.Key, st, chain.Full.LastRevision)
	if chain.Full.LastRevision <= 1 {
		hint = fmt.Sprintf("no older chain is before it: move the damaged object out of %v (or take it out of the backups with "+snap.ExcludeMark+"), or restore from another copy of the backups", st)
	}
	return fmt.Errorf("%w; %s", err, hint)
}

// checkFull trusts a full snapshot's content over its name: an object
// damaged, or named by hand, must not become a data dir, and must not
// make a member that holds newer data restore an older one. Fulls of
// etcd-backup-restore may hold more than their name says (it reads the
// revision before the stream), never less.
func checkFull(path string, full snap.Snapshot) (int64, error) {
	rev, err := snap.DatabaseRevision(path)
	if err != nil {
		return 0, fmt.Errorf("restore: full snapshot %s: %w: it is not a readable etcd database (%w)", full.Key, ErrDamaged, err)
	}
	if rev < full.LastRevision {
		return 0, fmt.Errorf("restore: full snapshot %s: %w: it holds revision %d, its name says %d", full.Key, ErrDamaged, rev, full.LastRevision)
	}
	return rev, nil
}

// fullFile is the name of the full snapshot's database in a work dir.
const fullFile = "full.db"

// replayChain downloads chain's full to db and its deltas into work, and
// replays them. It returns the replayer, still open, for the caller to
// read or close; with no deltas and open false there is none: the
// downloaded file is the result.
func replayChain(ctx context.Context, st store.Store, chain snap.Chain, db, work string, src ReadOptions, open bool) (Result, *replayer, error) {
	res := Result{Chain: chain}
	var total int64
	for _, s := range chain.Snapshots() {
		total += s.Size
	}
	f, err := newFetcher(st, src.Codec, work, src.Concurrency, src.Ahead)
	if err != nil {
		return res, nil, fmt.Errorf("restore: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer f.wg.Wait()
	defer cancel()
	full, deltas := f.start(ctx, chain, db)
	revisions := chain.LastRevision() - chain.Full.LastRevision
	if chain.UntilRevision > 0 {
		revisions = min(revisions, chain.UntilRevision-chain.Full.LastRevision)
	}
	report := func() {
		if src.Progress != nil {
			src.Progress(Progress{BytesDownloaded: f.bytes.Load(), BytesTotal: total, Revisions: res.Revisions, RevisionsTotal: max(0, revisions)})
		}
	}
	began := time.Now()
	// The deltas are downloaded and decoded while the full is: two cores
	// do both at once.
	batches := decodeAhead(ctx, f, deltas)
	if err := full.wait(ctx); err != nil {
		return res, nil, fmt.Errorf("restore: %w", err)
	}
	rev, err := checkFull(full.path, chain.Full)
	if err != nil {
		return res, nil, err
	}
	if src.Member != "" {
		if err := namesMember(full.path, src.Member, src.MemberName, chain.Full); err != nil {
			return res, nil, err
		}
	}
	res.Download = time.Since(began)
	res.Revision = rev
	report()
	if len(deltas) == 0 && !open {
		return res, nil, nil
	}

	began = time.Now()
	// An inherited chain stops where the timeline forked, by time too.
	stop := chain.UntilRevision
	if chain.Ceiling > 0 && (stop == 0 || stop > chain.Ceiling) {
		stop = chain.Ceiling
	}
	r := openReplayer(full.path, rev, stop, chain.UntilTime, src.UnknownLeaseTTL)
	r.unmap = src.unmap
	r.progress = func(n int64) {
		res.Revisions += n
		if res.Revisions%10000 == 0 {
			report()
		}
	}
	fail := func(err error) (Result, *replayer, error) {
		_ = r.close()
		return res, nil, fmt.Errorf("restore: %w", err)
	}
	// Decoding the JSON costs about as much as writing the revisions, so
	// one goroutine decodes ahead while this one writes.
	if err := r.apply(ctx, batches, nil); err != nil {
		return fail(err)
	}
	cancel()
	res.Revision = r.at
	res.GrantedLeases, res.GuessedLeases, res.DroppedLeases = r.grantedLeases, r.guessedLeases, r.droppedLeases
	if res.AuthRestored, res.UsersWithoutPassword, err = r.applyAuth(); err != nil {
		return fail(err)
	}
	res.Replay = time.Since(began)
	report()
	if chain.UntilRevision > 0 && res.Revision != chain.UntilRevision {
		return fail(fmt.Errorf("the chain ends at revision %d, before the wanted %d", res.Revision, chain.UntilRevision))
	}
	return res, r, nil
}

// checkSpace fails early when the file system cannot hold the work: the
// database, written once, into the new data dir (compressed fulls are
// assumed to grow 4 times, and the replay to add as much as the deltas
// hold, 4 times their objects), the deltas in flight and the WAL with room
// to spare.
func checkSpace(dir string, chain snap.Chain) error {
	db := chain.Full.Size
	if chain.Full.Compression != snap.None {
		db *= 4
	}
	var deltas, largest int64
	for _, d := range chain.Deltas {
		deltas += d.Size * 4
		largest = max(largest, d.Size)
	}
	need := db + deltas + 8*largest + 128<<20
	free, err := datadir.FreeSpace(dir)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore: free space of %s: %w", dir, err)
	}
	if free < need {
		return fmt.Errorf("restore into %s: %w: %d MiB free, about %d MiB needed for the database, its WAL and the deltas; free space or restore elsewhere",
			dir, ErrNoSpace, free>>20, need>>20)
	}
	return nil
}

// recordRestore writes down, on the store, what the new cluster was
// restored from: its sidecar continues that timeline when the restore
// reached its end, and begins a timeline of its own otherwise. A store
// this process may only read costs that: the sidecar then compares the
// cluster's keys with the chain's end, and begins a timeline when they do
// not show it continues it.
func recordRestore(ctx context.Context, st store.Store, opts Options, res *Result, latest snap.Chain) {
	id, err := etcdstorage.ClusterID(opts.Member.InitialCluster, opts.Member.Token)
	if err == nil {
		res.ClusterID = id
		err = snap.RecordRestore(ctx, st, snap.Restored{ClusterID: res.ClusterID, Timeline: res.Chain.Timeline,
			Snapshot: res.Chain.Full.Key, Revision: res.Revision, TimelineEnd: latest.LastRevision(),
			RevisionBump: res.RevisionBump, Created: opts.Now().UTC()})
	}
	if err != nil {
		opts.Read.Logger.Warn("restore: could not record what the restored cluster was restored from; its sidecar compares its keys with the chain's end instead",
			"error", err, "cluster", res.ClusterID)
	}
}

// namesMember fails unless the etcd database at path lists the member
// id, or a member named name.
func namesMember(path, id, name string, full snap.Snapshot) error {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("restore: full snapshot %s: %w", full.Key, err)
	}
	defer func() { _ = db.Close() }()
	var members []string
	named := false
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("members")); b != nil {
			return b.ForEach(func(k, v []byte) error {
				var m struct {
					Name string `json:"name"`
				}
				if json.Unmarshal(v, &m) == nil && m.Name != "" {
					named = named || m.Name == name
					members = append(members, fmt.Sprintf("%s (%s)", k, m.Name))
				} else {
					members = append(members, string(k))
				}
				named = named || string(k) == id
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore: full snapshot %s: %w", full.Key, err)
	}
	// A database without members (none etcd writes) cannot tell.
	if len(members) == 0 || named {
		return nil
	}
	return fmt.Errorf("restore: full snapshot %s names members %s, and this member (%s, %s) is none of them: %w: point the store at this cluster's backups, or restore them on purpose with etcd-backup restore",
		full.Key, strings.Join(members, ", "), name, id, snap.ErrOtherCluster)
}
