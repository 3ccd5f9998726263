package restore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/etcdkit/etcdkit/internal/datadir"
	"github.com/etcdkit/etcdkit/internal/etcdstorage"
	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// FollowOptions configures Follow. Restore says which data dir the
// standby becomes when Follow stops and how (member, revision bump); its
// Read.Target is ignored: a standby follows the newest state. With a
// Read.Secondary a poll reads the second site when the store cannot be
// listed or its newest chain is broken while the second's is whole, and
// reads the store again as soon as it answers whole.
type FollowOptions struct {
	// Restore is the data dir the standby becomes and how.
	Restore Options
	// Poll is how often the store is listed for new snapshots. Default 1 s.
	Poll time.Duration
	// CatchUpAfter is how long the deltas may stop short of a newer full
	// snapshot before the standby is built again from that full. An
	// uploader closes the old chain with a delta only after the new full
	// has landed, and etcd-backup-restore never does. Default 30 s.
	CatchUpAfter time.Duration
	// Applied, when set, is called from Follow's goroutine once the
	// standby is open (resumed or built), then after each delta applied
	// and each catch-up from a full snapshot.
	Applied func(Standby)
}

// Standby is where a follower is.
type Standby struct {
	// Revision the standby database holds.
	Revision int64
	// Full is the full snapshot the standby was last built from.
	Full string
	// Delta is the delta applied last; "" right after a catch-up.
	Delta string
	// Revisions replayed from deltas since Follow started.
	Revisions int64
	// CatchUps counts the standby's builds from a full snapshot since
	// Follow started: the first (unless it resumed), and one for each
	// chain it could not continue (a gap before a new full snapshot).
	CatchUps int
	// Resumed: Follow continued a standby a previous run left.
	Resumed bool
}

// The standby's files, in a directory beside the data dir: the database
// being replayed into, and what it follows.
const (
	standbySuffix = ".standby"
	standbyDB     = "db"
	standbyState  = "standby.json"
)

// standbyFile is standby.json: the store the standby follows and the full
// snapshot it was built from. The database's own revision is the truth of
// how far it is; this file only guards against following another store.
type standbyFile struct {
	Store string `json:"store"`
	Full  string `json:"full"`
	// Broken: a delta failed half-applied; the standby must be built again.
	Broken bool `json:"broken,omitempty"`
}

// Follow keeps a warm standby of the store's newest state: it restores
// the latest chain once into a database beside opts.DataDir (in
// DataDir.standby), then lists the store every Poll and replays each new
// delta into that same database as it lands. A new full snapshot is
// followed without a download as long as the deltas continue the standby;
// after a gap (deltas expired or never written) the standby is built
// again from the newest full, the old one serving until the new one is
// ready. A follower killed at any point resumes where its database stands,
// without downloading the full again: the backend commits only whole
// revisions.
//
// When ctx ends, Follow reads the store once more (what landed since, or
// the newest chain at once when no delta continues the standby), makes a
// copy of the standby a member's data dir at opts.DataDir, exactly as
// Restore would (the old data dir moved aside, the revision bumped as
// asked), and returns; the standby stays, and the next
// Follow continues it. Errors of the store are logged and retried at the
// next poll; Follow returns an error only when it cannot build a standby
// or the data dir.
func Follow(ctx context.Context, st store.Store, opts FollowOptions) (Result, error) {
	o, err := opts.Restore.withDefaults()
	if err != nil {
		return Result{}, err
	}
	opts.Restore = o
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.CatchUpAfter <= 0 {
		opts.CatchUpAfter = 30 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(o.Member.DataDir), 0o700); err != nil {
		return Result{}, fmt.Errorf("restore: %w", err)
	}
	// Held for the follower's life: no restore builds this data dir
	// meanwhile, and no second follower replays into the standby.
	unlock, err := datadir.LockBuild(o.Member.DataDir)
	if err != nil {
		return Result{}, fmt.Errorf("restore: %w", err)
	}
	defer unlock()
	f := &follower{st: st, site: st, opts: opts, dir: o.Member.DataDir + standbySuffix}
	defer f.close()
	if err := f.open(ctx); err != nil {
		return Result{}, err
	}
	for ctx.Err() == nil {
		if err := f.poll(ctx, false); err != nil && ctx.Err() == nil {
			o.Read.Logger.Warn("restore: follow: the standby did not advance; trying again", "revision", f.r.at, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(opts.Poll):
		}
	}
	// The data dir is made even though ctx ended: that is what stopping a
	// follower asks for. It holds what the store holds now, as a plain
	// restore would: a last poll applies what landed since the previous
	// one, and builds the standby again from the newest chain at once when
	// no delta continues it (the wait for an uploader to close the old
	// chain is over). Then only local files are written, and one record on
	// the store.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	if err := f.poll(lctx, true); err != nil {
		o.Read.Logger.Warn("restore: follow: the store was not read once more before the data dir was made; "+
			"the data dir holds the standby's revision, and the store may hold later ones: restore again to be sure",
			"revision", f.r.at, "error", err)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	return f.promote(pctx)
}

// follower is Follow's state.
type follower struct {
	// st is the store the standby follows; site is the one of it and
	// opts.Secondary the last listing read, and downloads read.
	st, site store.Store
	opts     FollowOptions
	dir      string
	// r replays into the standby database; full is the full snapshot
	// whose chain the standby is in, latest the store's newest chain at
	// the last listing.
	r      *replayer
	full   snap.Snapshot
	latest snap.Chain
	status Standby
	// broken: a delta failed half-applied; the standby is built again.
	broken bool
	// short is when the deltas were first seen to stop short of the
	// newest full; zero while they reach it.
	short time.Time
	// What the Result reports: leases granted again, users and roles.
	grants, guess, dropped int64
	auth                   bool
	noPassword             []string
}

func (f *follower) db() string { return filepath.Join(f.dir, standbyDB) }

// open resumes the standby a previous Follow left, or builds one from the
// store's latest chain.
func (f *follower) open(ctx context.Context) error {
	// What a killed follower was building or downloading.
	for _, pattern := range []string{"catch-up-*", "deltas-*", standbyState + ".tmp"} {
		left, _ := filepath.Glob(filepath.Join(f.dir, pattern))
		for _, l := range left {
			if err := os.RemoveAll(l); err != nil {
				return fmt.Errorf("restore: follow: %w", err)
			}
		}
	}
	state, err := f.readState()
	switch {
	case err == nil:
		rev, err := snap.DatabaseRevision(f.db())
		if err != nil {
			return fmt.Errorf("restore: follow: the standby database %s: %w; move %s away to build a new standby", f.db(), err, f.dir)
		}
		f.r = openReplayer(f.db(), rev, 0, time.Time{}, f.opts.Restore.Read.UnknownLeaseTTL)
		if f.full, err = snap.Parse(state.Full); err != nil {
			return fmt.Errorf("restore: follow: %s names no full snapshot (%w); move %s away to build a new standby", filepath.Join(f.dir, standbyState), err, f.dir)
		}
		f.broken = state.Broken
		f.status = Standby{Revision: rev, Full: state.Full, Resumed: true}
		f.opts.Restore.Read.Logger.Info("restore: follow: resuming the standby", "dir", f.dir, "revision", rev, "full", state.Full)
		f.applied()
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	// Until the store holds a chain (a follower started beside a new
	// uploader), and through the store's errors, try again every Poll.
	for {
		f.site = Site(ctx, f.st, f.opts.Restore.Read)
		chain, latest, _, err := pick(ctx, f.site, Target{})
		if err == nil {
			f.latest = latest
			if err = f.catchUp(ctx, chain); err == nil {
				return nil
			}
		}
		f.opts.Restore.Read.Logger.Warn("restore: follow: no standby yet; trying again", "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("restore: follow: stopped before a standby was built: %w", err)
		case <-time.After(f.opts.Poll):
		}
	}
}

// readState reads standby.json, refusing a standby of another store.
func (f *follower) readState() (standbyFile, error) {
	var s standbyFile
	data, err := os.ReadFile(filepath.Join(f.dir, standbyState))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("restore: follow: %s: %w; move %s away to build a new standby", filepath.Join(f.dir, standbyState), err, f.dir)
	}
	if s.Store != fmt.Sprint(f.st) {
		return s, fmt.Errorf("restore: follow: the standby in %s follows %s, not %s: move it away, or give another data dir", f.dir, s.Store, f.st)
	}
	return s, nil
}

// writeState records what the standby follows, atomically.
func (f *follower) writeState() error {
	data, err := json.Marshal(standbyFile{Store: fmt.Sprint(f.st), Full: f.full.Key, Broken: f.broken})
	if err != nil {
		return err
	}
	tmp := filepath.Join(f.dir, standbyState+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	if err := etcdstorage.SyncFile(tmp); err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, standbyState)); err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	datadir.SyncParent(tmp)
	return nil
}

// catchUp builds the standby again from chain, beside the one it replaces,
// which stays whole until the new one is complete.
func (f *follower) catchUp(ctx context.Context, chain snap.Chain) error {
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	if err := checkSpace(f.dir, chain); err != nil {
		return err
	}
	work, err := os.MkdirTemp(f.dir, "catch-up-")
	if err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	next := filepath.Join(work, standbyDB)
	res, r, err := replayChain(ctx, f.site, chain, next, work, f.opts.Restore.Read, true)
	if err != nil {
		return err
	}
	if err := r.close(); err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	if err := etcdstorage.SyncFile(next); err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	if f.r != nil {
		f.count(f.r)
		_ = f.r.close()
		f.r = nil
	}
	// The state names the new full only once the database is in place. A
	// kill in between leaves the old full's name with the new database;
	// the next delta past the newest full names that one.
	if err := os.Rename(next, f.db()); err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	datadir.SyncParent(f.db())
	f.full, f.broken = chain.Full, false
	if err := f.writeState(); err != nil {
		return err
	}
	f.r = openReplayer(f.db(), res.Revision, 0, time.Time{}, f.opts.Restore.Read.UnknownLeaseTTL)
	f.grants, f.guess, f.dropped = f.grants+res.GrantedLeases, f.guess+res.GuessedLeases, f.dropped+res.DroppedLeases
	f.auth, f.noPassword = f.auth || res.AuthRestored, res.UsersWithoutPassword
	f.status.Revision, f.status.Full, f.status.Delta = res.Revision, chain.Full.Key, ""
	f.status.Revisions += res.Revisions
	f.status.CatchUps++
	f.opts.Restore.Read.Logger.Info("restore: follow: the standby is built from a full snapshot", "full", chain.Full.Key,
		"deltas", len(chain.Deltas), "revision", res.Revision, "took", (res.Download + res.Replay).Round(time.Millisecond))
	f.applied()
	return nil
}

// count adds what replayer r granted, guessed and dropped to the
// Result's totals, before r is closed or reported; it counts a
// replayer once.
func (f *follower) count(r *replayer) {
	f.grants, f.guess, f.dropped = f.grants+r.grantedLeases, f.guess+r.guessedLeases, f.dropped+r.droppedLeases
	r.grantedLeases, r.guessedLeases, r.droppedLeases = 0, 0, 0
}

func (f *follower) applied() {
	if f.opts.Applied != nil {
		f.opts.Applied(f.status)
	}
}

// poll lists the store and brings the standby to its newest revision:
// the deltas that continue it, or a catch-up from the newest full when
// none does, after CatchUpAfter, or at once when final (the follower
// stops).
func (f *follower) poll(ctx context.Context, final bool) error {
	lctx := ctx
	if final {
		// A store that does not answer does not hold the promotion up
		// for long: the standby is what there is.
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	cat, latest, err := f.list(lctx)
	if err != nil {
		return err
	}
	f.latest = latest
	if f.broken {
		return f.catchUpLatest(ctx, latest)
	}
	if tl := timelineOf(cat, f.full); tl != "" && tl != latest.Timeline {
		// A cluster restored to another past began a timeline: the
		// standby's past is no longer the newest, and no delta of the new
		// one continues it.
		f.opts.Restore.Read.Logger.Info("restore: follow: a new timeline began; building the standby again from its newest full snapshot",
			"standby_timeline", tl, "timeline", latest.Timeline, "full", latest.Full.Key)
		f.short = time.Time{}
		return f.catchUpLatest(ctx, latest)
	}
	next := cat.Continuing(f.full, f.r.at)
	reaches := f.r.at
	if len(next) > 0 {
		reaches = next[len(next)-1].LastRevision
	}
	switch {
	case reaches >= latest.Full.LastRevision:
		f.short = time.Time{}
	case f.short.IsZero() && !final:
		f.short = time.Now()
	case final || time.Since(f.short) >= f.opts.CatchUpAfter:
		// The deltas stop short of the newest full: it is the way on.
		f.opts.Restore.Read.Logger.Info("restore: follow: no deltas continue the standby to the newest full snapshot; building it again from that",
			"revision", f.r.at, "full", latest.Full.Key, "full_revision", latest.Full.LastRevision, "waited", f.opts.CatchUpAfter, "stopping", final)
		f.short = time.Time{}
		return f.catchUpLatest(ctx, latest)
	}
	if len(next) == 0 {
		return nil
	}
	return f.replay(ctx, next)
}

// list lists the site a poll reads: the store, or the second site when
// the store cannot be listed or its newest chain is broken while the
// second's is whole (Site's choice, made at every poll). When neither
// is whole it is the store's listing, as without a second site: its
// deltas may still continue the standby up to the gap. A change of site
// is logged once.
func (f *follower) list(ctx context.Context) (snap.Catalog, snap.Chain, error) {
	cat, latest, err := listLatest(ctx, f.st)
	site, why := f.st, err
	if err == nil {
		why = broken(latest)
	}
	if why != nil && f.opts.Restore.Read.Secondary != nil {
		if cat2, latest2, err2 := listLatest(ctx, f.opts.Restore.Read.Secondary); err2 == nil && broken(latest2) == nil {
			cat, latest, site, err = cat2, latest2, f.opts.Restore.Read.Secondary, nil
		}
	}
	if site != f.site {
		if site == f.st {
			f.opts.Restore.Read.Logger.Info("restore: follow: the first site answers whole again; reading it", "store", fmt.Sprint(site))
		} else {
			f.opts.Restore.Read.Logger.Warn("restore: follow: reading the second site: the first has no whole chain", "store", fmt.Sprint(site),
				"first", fmt.Sprint(f.st), "why", why)
		}
		f.site = site
	}
	return cat, latest, err
}

// timelineOf is the timeline of the store's object s ("" when it is gone:
// retention may delete a full whose deltas go on).
func timelineOf(cat snap.Catalog, s snap.Snapshot) string {
	for _, o := range cat.All() {
		if o.Key == s.Key {
			return o.Timeline
		}
	}
	return ""
}

func (f *follower) catchUpLatest(ctx context.Context, latest snap.Chain) error {
	chain, err := latest.Check()
	if err != nil {
		return err
	}
	return f.catchUp(ctx, chain)
}

// replay applies deltas to the standby. A delta that fails to apply
// leaves the standby to be built again at the next poll: what the failed
// batch wrote may hold part of a revision.
func (f *follower) replay(ctx context.Context, deltas []snap.Snapshot) error {
	work, err := os.MkdirTemp(f.dir, "deltas-")
	if err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	fe, err := newFetcher(f.site, f.opts.Restore.Read.Codec, work, f.opts.Restore.Read.Concurrency, f.opts.Restore.Read.Ahead)
	if err != nil {
		return fmt.Errorf("restore: follow: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer fe.wg.Wait()
	defer cancel()
	batches := decodeAhead(ctx, fe, fe.startDeltas(ctx, deltas))
	before, whole := f.r.applied, f.r.at
	var stateErr error
	err = f.r.apply(ctx, batches, func(name string) {
		f.status.Revision, f.status.Delta = f.r.at, name
		f.status.Revisions += f.r.applied - before
		before, whole = f.r.applied, f.r.at
		// Past the newest full, the standby is that chain's: its record is
		// the one a promoted member continues.
		if latest := f.latest.Full; f.r.at >= latest.LastRevision && latest.Key != f.full.Key {
			f.full, f.status.Full = latest, latest.Key
			stateErr = errors.Join(stateErr, f.writeState())
		}
		f.applied()
	})
	err = errors.Join(err, stateErr)
	if err != nil {
		// A delta that failed before its first event (a download) leaves
		// the standby as it was. One that failed on the way may be damaged
		// where it was already applied (its checksum is checked at its end),
		// and a revision may be part-written: the standby is built again.
		if f.r.torn || f.r.at != whole {
			f.broken = true
			if werr := f.writeState(); werr != nil {
				err = errors.Join(err, werr)
			}
		}
		return fmt.Errorf("restore: follow: %w", err)
	}
	auth, noPassword, err := f.r.applyAuth()
	if err != nil {
		f.broken = true
		return fmt.Errorf("restore: follow: %w", err)
	}
	if auth {
		f.auth, f.noPassword = true, noPassword
	}
	return nil
}

// promote makes a copy of the standby a member's data dir at DataDir.
func (f *follower) promote(ctx context.Context) (Result, error) {
	start := time.Now()
	o := f.opts.Restore
	f.count(f.r)
	res := Result{Chain: snap.Chain{Full: f.full, Timeline: cmp.Or(f.full.Timeline, f.latest.Timeline)}, Revision: f.r.at, Revisions: f.status.Revisions,
		GrantedLeases: f.grants, GuessedLeases: f.guess, DroppedLeases: f.dropped,
		AuthRestored: f.auth, UsersWithoutPassword: f.noPassword}
	if f.latest.Full.Key == f.full.Key {
		res.Chain.Deltas = slices.DeleteFunc(slices.Clone(f.latest.Deltas), func(d snap.Snapshot) bool { return d.LastRevision > f.r.at })
	}
	if f.broken {
		return res, fmt.Errorf("restore: follow: the standby at revision %d broke on its last delta and was not built again; run the follower again, or restore", f.r.at)
	}
	release, err := datadir.Hold(o.Member.DataDir, o.Member.WALDir)
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	defer release()
	parent := filepath.Dir(o.Member.DataDir)
	work, err := os.MkdirTemp(parent, filepath.Base(o.Member.DataDir)+".tmp-")
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	out := filepath.Join(work, "data")
	db := dbPath(out)
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	// The standby stays as it is, to be followed again; the member gets a
	// consistent copy, from one read transaction.
	f.r.release()
	f.r.b.Commit()
	if err := copyDatabase(f.r, db); err != nil {
		return res, fmt.Errorf("restore into %s: copy the standby: %w", o.Member.DataDir, err)
	}
	if o.SafeRevision && o.RevisionBump == 0 && f.latest.Full.Key == "" {
		// No listing succeeded yet: the estimate needs one.
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, f.latest, _, err = pick(lctx, Site(lctx, f.st, f.opts.Restore.Read), Target{})
		cancel()
		if err != nil {
			return res, fmt.Errorf("restore into %s: the revision bump needs the store's latest chain: %w", o.Member.DataDir, err)
		}
	}
	if res.RevisionBump, err = o.bump(f.latest, 0, res.Revision); err != nil {
		return res, err
	}
	if err := finishInPlace(nil, out, res.Revision, o.member(res.RevisionBump)); err != nil {
		return res, fmt.Errorf("restore into %s: build the data dir: %w", o.Member.DataDir, err)
	}
	if err := install(ctx, f.st, o, out, release, &res, f.latest, start); err != nil {
		return res, err
	}
	return res, nil
}

// copyDatabase writes the replayer's committed database to path. Nothing
// writes the standby meanwhile (its replay stopped and its last batch is
// committed), so the file as it lies holds that database, and the kernel
// copies it (copy_file_range; on a file system that shares extents, none
// of it). bbolt's own copy reads and writes through a buffer: 16 s for an
// 8 GiB standby on the bench machine, where this takes about 7.
func copyDatabase(r *replayer, path string) error {
	size := r.b.Size()
	src, err := os.Open(r.path)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(src, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s holds %d of the database's %d bytes", r.path, n, size)
	}
	return errors.Join(err, out.Close())
}

func (f *follower) close() {
	if f.r != nil {
		f.count(f.r)
		_ = f.r.close()
		f.r = nil
	}
}
