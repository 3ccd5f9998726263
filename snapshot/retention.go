package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// Policy chooses which full snapshots retention keeps.
type Policy string

const (
	// Exponential keeps every full snapshot of the last hour, the latest of
	// each hour for a day, of each day for a week and of each week for four
	// weeks.
	Exponential Policy = "Exponential"
	// LimitBased keeps the newest MaxFulls full snapshots.
	LimitBased Policy = "LimitBased"
)

// Retention says what GC keeps. The zero value is the Exponential policy
// keeping the deltas of every kept full snapshot.
type Retention struct {
	// Policy: default Exponential.
	Policy Policy
	// MaxFulls is what LimitBased keeps. Default 7.
	MaxFulls int
	// DeltaRetention bounds how long the deltas of a superseded chain are
	// kept after the next full snapshot was taken; they serve
	// point-in-time restores into the past. 0 keeps them as long as their
	// full snapshot.
	DeltaRetention time.Duration
}

// Check reports a retention that cannot be applied.
func (r Retention) Check() error {
	switch r.Policy {
	case "", Exponential, LimitBased:
	default:
		return fmt.Errorf("retention policy %q: want Exponential or LimitBased", r.Policy)
	}
	if r.MaxFulls < 0 || r.DeltaRetention < 0 {
		return errors.New("retention: MaxFulls and DeltaRetention cannot be negative")
	}
	return nil
}

// Expired lists what r deletes from cat at now, sorted by revision. The
// policy applies to each timeline's own full snapshots apart, so a
// timeline that forked keeps its old past as long as any past of that
// age is kept. The newest timeline's newest full snapshot and every delta
// after it (the chain a restore uses) are never expired, nor is anything
// in the read-only v1 layout.
func (r Retention) Expired(cat Catalog, now time.Time) []Snapshot {
	var expired []Snapshot
	newest := cat.Timelines[len(cat.Timelines)-1].ID
	for _, t := range cat.Timelines {
		var fulls, deltas []Snapshot
		for _, s := range cat.all {
			switch {
			case s.Timeline != t.ID || s.Legacy():
			case s.Kind == KindFull:
				fulls = append(fulls, s)
			default:
				deltas = append(deltas, s)
			}
		}
		if len(fulls) == 0 {
			continue
		}
		keep := r.keptFulls(fulls, now, t.ID == newest)
		var kept []Snapshot
		for i, s := range fulls {
			if keep[i] {
				kept = append(kept, s)
			} else {
				expired = append(expired, s)
			}
		}
		for _, d := range deltas {
			if r.deltaExpired(d, kept, now) {
				expired = append(expired, d)
			}
		}
	}
	sortSnapshots(expired)
	return expired
}

// keptFulls marks the fulls of one timeline (sorted by revision) the
// policy keeps; the newest always when the timeline is the newest.
func (r Retention) keptFulls(fulls []Snapshot, now time.Time, newestTimeline bool) []bool {
	keep := make([]bool, len(fulls))
	newest := len(fulls) - 1
	keep[newest] = newestTimeline
	if r.Policy == LimitBased {
		n := r.MaxFulls
		if n == 0 {
			n = 7
		}
		for i := max(0, len(fulls)-n); i < len(fulls); i++ {
			keep[i] = true
		}
		return keep
	}
	type bucket struct {
		unit time.Duration
		n    int64
	}
	seen := map[bucket]bool{}
	// Newest first, so the first full seen in a bucket is its latest.
	for i := newest; i >= 0; i-- {
		age := now.Sub(fulls[i].Created)
		var unit time.Duration
		switch {
		case age < time.Hour:
			keep[i] = true
			continue
		case age < 24*time.Hour:
			unit = time.Hour
		case age < 7*24*time.Hour:
			unit = 24 * time.Hour
		case age < 28*24*time.Hour:
			unit = 7 * 24 * time.Hour
		default:
			continue
		}
		b := bucket{unit, int64(age / unit)}
		if !seen[b] {
			seen[b] = true
			keep[i] = true
		}
	}
	return keep
}

// deltaExpired: a delta belongs to the newest kept full of its timeline
// below it. With none it is useless; after the newest full it is needed;
// otherwise it lives DeltaRetention past the next kept full.
func (r Retention) deltaExpired(d Snapshot, kept []Snapshot, now time.Time) bool {
	owner := -1
	for i, f := range kept {
		if f.LastRevision < d.LastRevision {
			owner = i
		}
	}
	switch {
	case owner < 0:
		return true
	case owner == len(kept)-1:
		return false
	case r.DeltaRetention == 0:
		return false
	}
	return now.Sub(kept[owner+1].Created) > r.DeltaRetention
}

// GCOptions configures GC. The zero value deletes.
type GCOptions struct {
	// DryRun lists what would be deleted and deletes nothing.
	DryRun bool
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the time ages are measured from. Default: time.Now.
	Now func() time.Time
	// Codec and SpoolDir read a kept full snapshot that has no identity
	// record naming it, to check it holds what its name says (SpoolDir
	// default os.TempDir()).
	Codec    Codec
	SpoolDir string
	// Checked remembers across runs which fulls were found to hold what
	// their names say and which not, so each is read once and a full set
	// aside is logged once. nil: every run checks again.
	Checked *CheckedFulls
}

// CheckedFulls are full snapshots checked against their names, with
// what was found (nil: it holds what its name says). Objects are
// create-only, so a key checked once stays checked. Safe for concurrent
// use; the zero value is empty.
type CheckedFulls struct {
	mu   sync.Mutex
	keys map[string]error
}

// get is what was found of key, and whether it was checked.
func (c *CheckedFulls) get(key string) (checked bool, found error) {
	if c == nil {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	found, checked = c.keys[key]
	return checked, found
}

func (c *CheckedFulls) add(key string, err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[string]error{}
	}
	c.keys[key] = err
}

// GCResult is what a GC run did.
type GCResult struct {
	// Deleted are the snapshots deleted (with DryRun: those that would be).
	Deleted []Snapshot
	// Locked are the expired snapshots a write-once lock kept
	// (store.ErrLocked). Each run asks again, so they go once their lock
	// ends.
	Locked []Snapshot
	// KeptForLock are expired deltas of a locked full's chain, kept so the
	// chain stays whole while its full does.
	KeptForLock []Snapshot
	// SetAside are full snapshots that do not hold what their names say
	// (ErrNotABackup, in Why): neither counted by the policy nor deleted.
	SetAside []SetAside
	// DrillsDeleted counts drill records deleted: all but the newest 32
	// and the newest a sidecar verified against its cluster.
	DrillsDeleted int
}

// SetAside is a full snapshot retention does not count, and why.
type SetAside struct {
	Snapshot Snapshot
	Why      error
}

// GC deletes the snapshots r expires. A delete a write-once lock refuses
// is no failure: the snapshot stays, is reported in Locked, and is asked
// again on the next run; the deltas of a locked full's chain are kept
// with it. Any other failed delete stops GC; what it did before is
// returned with the error.
func GC(ctx context.Context, st store.Store, r Retention, opts GCOptions) (GCResult, error) {
	var res GCResult
	if err := r.Check(); err != nil {
		return res, err
	}
	if sw, ok := store.AsSweeper(st); ok && !opts.DryRun {
		// What writers killed mid-write left in a file store goes too.
		sw.Sweep()
	}
	cat, err := List(ctx, st)
	if err != nil {
		return res, err
	}
	log := logger(opts.Logger)
	expired, aside, found, err := r.expiredChecked(ctx, st, cat, opts)
	res.SetAside = aside
	if found > 0 {
		log.Warn("retention: full snapshots that do not hold what their names say are neither counted nor deleted; delete them or take them out of the backups with "+store.ExcludeTag,
			"count", len(aside), "first", aside[0].Snapshot.Key, "why", aside[0].Why)
	}
	if err != nil {
		return res, err
	}
	if opts.DryRun {
		res.Deleted = expired
		return res, nil
	}
	// Expiry depends only on the kept snapshots, so a GC interrupted here
	// leaves nothing the next run would keep. Expired is in revision
	// order: a chain's full comes before its deltas.
	lockedChains := map[string]bool{}
	for _, s := range expired {
		if s.Kind == KindDelta {
			if full, ok := fullOf(cat, s); ok && lockedChains[full.Key] {
				res.KeptForLock = append(res.KeptForLock, s)
				continue
			}
		}
		err := st.Delete(ctx, s.Key)
		switch {
		case errors.Is(err, store.ErrLocked):
			res.Locked = append(res.Locked, s)
			if s.Kind == KindFull {
				lockedChains[s.Key] = true
			}
			log.Debug("retention: the snapshot is locked (write-once)", "key", s.Key)
			continue
		case err != nil:
			return res, fmt.Errorf("gc: delete %s: %w", s.Key, err)
		}
		res.Deleted = append(res.Deleted, s)
		if s.Kind == KindFull {
			// Its chain's identity goes with it; one left over costs a
			// few bytes and misleads nobody, so a failure is not one.
			_ = st.Delete(ctx, identityKey(s))
		}
		log.Info("snapshot deleted by retention", "key", s.Key, "policy", r.Policy)
	}
	if res.DrillsDeleted, err = pruneDrills(ctx, st); err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	if len(res.Locked) > 0 {
		// Once a run, not once a snapshot: on a bucket locked for days
		// every run meets the same ones.
		log.Info("retention: expired snapshots are locked (write-once); kept, and asked again on the next run",
			"locked", len(res.Locked), "oldest", res.Locked[0].Key, "kept_with_their_full", len(res.KeptForLock))
	}
	return res, nil
}

// expiredChecked is what r expires once every full snapshot it keeps,
// and so lets supersede others, was checked to hold what its name says: a
// full copied or written by hand under a newer name would otherwise
// expire the real ones (and make every delta since look superseded). The
// fulls that fail are set aside and the policy runs again without them;
// found counts those this run found, not Checked. A full that cannot be
// checked (the store does not answer) stops GC: unknown is no reason to
// delete.
func (r Retention) expiredChecked(ctx context.Context, st store.Store, cat Catalog, opts GCOptions) (expired []Snapshot, aside []SetAside, found int, err error) {
	for {
		expired = r.Expired(cat, now(opts.Now))
		if len(expired) == 0 {
			return nil, aside, found, nil
		}
		gone := map[string]bool{}
		for _, s := range expired {
			gone[s.Key] = true
		}
		var bad []string
		for _, s := range cat.all {
			if s.Kind != KindFull || s.Legacy() || gone[s.Key] {
				continue
			}
			known, cerr := opts.Checked.get(s.Key)
			if !known {
				cerr = checkFull(ctx, st, s, opts)
			}
			switch {
			case errors.Is(cerr, ErrNotABackup):
				aside = append(aside, SetAside{Snapshot: s, Why: cerr})
				bad = append(bad, s.Key)
				if !known {
					found++
					opts.Checked.add(s.Key, cerr)
				}
			case cerr != nil:
				return nil, aside, found, fmt.Errorf("gc: %s is kept and would expire older snapshots, and whether it holds what its name says is not known; nothing deleted: %w", s.Key, cerr)
			case !known:
				opts.Checked.add(s.Key, nil)
			}
		}
		if len(bad) == 0 {
			return expired, aside, found, nil
		}
		cat.all = slices.DeleteFunc(slices.Clone(cat.all), func(s Snapshot) bool { return slices.Contains(bad, s.Key) })
	}
}

// checkFull checks that full holds what its name says: by its identity
// record, which its writer wrote naming it, or else by its database.
func checkFull(ctx context.Context, st store.Store, full Snapshot, opts GCOptions) error {
	id, ok, err := ReadIdentity(ctx, st, full)
	if err != nil {
		return err
	}
	if ok && id.Snapshot == full.Key && id.Revision == full.LastRevision {
		return nil
	}
	path, done, err := spoolFull(ctx, st, full, opts.Codec, opts.SpoolDir)
	if err != nil {
		if errors.Is(err, ErrChecksum) || errors.Is(err, ErrTruncated) {
			// A damaged full restores nothing either.
			return fmt.Errorf("%w: %w", ErrNotABackup, err)
		}
		return err
	}
	defer done()
	return holdsItsName(full, path)
}

// fullOf is the full whose chain delta d is in: the newest full of its
// timeline below it.
func fullOf(cat Catalog, d Snapshot) (Snapshot, bool) {
	var full Snapshot
	found := false
	for _, s := range cat.all {
		if s.Kind == KindFull && s.Timeline == d.Timeline && !s.Legacy() && s.LastRevision < d.LastRevision &&
			(!found || s.LastRevision > full.LastRevision) {
			full, found = s, true
		}
	}
	return full, found
}
