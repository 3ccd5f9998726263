package snapshot

import (
	"cmp"
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
	// Calendar keeps the union of what each of its rules keeps: the
	// newest full of each of the newest Hourly hours, Daily days, Weekly
	// ISO weeks, Monthly months and Yearly years that hold one (as restic
	// and borg count them: a period without a full is not counted, so a
	// cluster whose backups stopped keeps its last ones), every full
	// younger than MaxAge, and the newest fulls whose chains together fit
	// in MaxSize bytes. A kept full keeps its own chain whole: the deltas
	// after it up to the next full.
	Calendar Policy = "Calendar"
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
	// The Calendar policy's rules (the other policies take none); a zero
	// rule keeps nothing, and at least one is needed.
	Hourly, Daily, Weekly, Monthly, Yearly int
	MaxAge                                 time.Duration
	MaxSize                                int64
	// Location is the time zone Calendar's periods are counted in. nil:
	// UTC.
	Location *time.Location
}

// Check reports a retention that cannot be applied.
func (r Retention) Check() error {
	calendar := r.Hourly != 0 || r.Daily != 0 || r.Weekly != 0 || r.Monthly != 0 || r.Yearly != 0 || r.MaxAge != 0 || r.MaxSize != 0
	switch r.Policy {
	case "", Exponential, LimitBased:
		if calendar {
			return fmt.Errorf("retention policy %s: the hourly, daily, weekly, monthly, yearly, max-age and max-size rules are the Calendar policy's", r.policy())
		}
	case Calendar:
		if !calendar {
			return errors.New("retention policy Calendar: give at least one rule (hourly, daily, weekly, monthly, yearly, max-age or max-size)")
		}
	default:
		return fmt.Errorf("retention policy %q: want Exponential, LimitBased or Calendar", r.Policy)
	}
	if r.MaxFulls < 0 || r.DeltaRetention < 0 || r.Hourly < 0 || r.Daily < 0 || r.Weekly < 0 || r.Monthly < 0 || r.Yearly < 0 || r.MaxAge < 0 || r.MaxSize < 0 {
		return errors.New("retention: no count, age or size can be negative")
	}
	return nil
}

func (r Retention) policy() Policy {
	if r.Policy == "" {
		return Exponential
	}
	return r.Policy
}

// Kept is a snapshot retention keeps, and the rules that keep it: for a
// full "newest chain", "pinned", the policy's rule ("daily 2026-12-06",
// "max-age", "limit-based", "exponential hourly", …); for a delta the
// full whose chain it is in ("chain of KEY").
type Kept struct {
	Snapshot Snapshot
	Rules    []string
	// Full is, for a delta, the key of the full whose chain keeps it.
	Full string
	// Pin is a pinned full's pin.
	Pin *Pin
}

// Plan is what a retention keeps of a store and what it expires, each
// sorted by revision.
type Plan struct {
	Kept    []Kept
	Expired []Snapshot
}

// Expired lists what r deletes from cat at now, sorted by revision: the
// Plan's, with no pins.
func (r Retention) Expired(cat Catalog, now time.Time) []Snapshot {
	return r.Plan(cat, now, nil).Expired
}

// Plan sorts cat's snapshots into what r keeps at now, with why, and what
// it expires. The policy applies to each timeline's own full snapshots
// apart (but MaxSize to the store's), so a timeline that forked keeps its
// old past as long as any past of that age is kept. The newest timeline's
// newest full snapshot and every delta after it (the chain a restore
// uses) are never expired, nor is a pinned full with its chain, nor
// anything in the read-only v1 layout.
func (r Retention) Plan(cat Catalog, now time.Time, pins Pins) Plan {
	var plan Plan
	newest := cat.Timelines[len(cat.Timelines)-1].ID
	bySize := r.keptBySize(cat)
	for _, t := range cat.Timelines {
		var fulls, deltas []Snapshot
		for _, s := range cat.all {
			switch {
			case s.Timeline != t.ID:
			case s.Legacy():
				if t.ID == FirstTimeline {
					plan.Kept = append(plan.Kept, Kept{Snapshot: s, Rules: []string{"v1 layout (read-only)"}})
				}
			case s.Kind == KindFull:
				fulls = append(fulls, s)
			default:
				deltas = append(deltas, s)
			}
		}
		if len(fulls) == 0 {
			// A timeline's deltas before its first full: nothing
			// supersedes them yet.
			for _, d := range deltas {
				plan.Kept = append(plan.Kept, Kept{Snapshot: d, Rules: []string{"no full on its timeline yet"}})
			}
			continue
		}
		rules := r.keptFulls(fulls, now, t.ID == newest)
		var kept []Snapshot
		// pinned are the pinned fulls, true for those the pin alone keeps.
		pinned := map[string]bool{}
		for i, s := range fulls {
			if bySize[s.Key] {
				rules[i] = append(rules[i], "max-size")
			}
			var pin *Pin
			if p, ok := pins[s.Key]; ok {
				pinned[s.Key], pin = len(rules[i]) == 0, &p
				rules[i] = append(rules[i], p.rule())
			}
			if len(rules[i]) > 0 {
				kept = append(kept, s)
				plan.Kept = append(plan.Kept, Kept{Snapshot: s, Rules: rules[i], Pin: pin})
			} else {
				plan.Expired = append(plan.Expired, s)
			}
		}
		for _, d := range deltas {
			if owner, ok := r.deltaKept(d, fulls, kept, pinned, now); ok {
				plan.Kept = append(plan.Kept, Kept{Snapshot: d, Rules: []string{"chain of " + owner.Key}, Full: owner.Key})
			} else {
				plan.Expired = append(plan.Expired, d)
			}
		}
	}
	sortSnapshots(plan.Expired)
	slices.SortStableFunc(plan.Kept, func(a, b Kept) int { return compareSnapshots(a.Snapshot, b.Snapshot) })
	return plan
}

// keptFulls is, for each full of one timeline (sorted by revision), the
// rules of the policy that keep it (none: it expires); the newest is kept
// when the timeline is the newest.
func (r Retention) keptFulls(fulls []Snapshot, now time.Time, newestTimeline bool) [][]string {
	rules := make([][]string, len(fulls))
	newest := len(fulls) - 1
	if newestTimeline {
		rules[newest] = []string{"newest chain"}
	}
	switch r.policy() {
	case LimitBased:
		n := r.MaxFulls
		if n == 0 {
			n = 7
		}
		for i := max(0, len(fulls)-n); i < len(fulls); i++ {
			rules[i] = append(rules[i], fmt.Sprintf("limit-based (newest %d)", n))
		}
	case Calendar:
		r.calendar(fulls, now, rules)
	default:
		exponential(fulls, now, rules)
	}
	return rules
}

// exponential marks what the Exponential policy keeps of fulls.
func exponential(fulls []Snapshot, now time.Time, rules [][]string) {
	type bucket struct {
		unit time.Duration
		n    int64
	}
	seen := map[bucket]bool{}
	// Newest first, so the first full seen in a bucket is its latest.
	for i := len(fulls) - 1; i >= 0; i-- {
		age := now.Sub(fulls[i].Created)
		var unit time.Duration
		var name string
		switch {
		case age < time.Hour:
			rules[i] = append(rules[i], "exponential (the last hour)")
			continue
		case age < 24*time.Hour:
			unit, name = time.Hour, "hourly"
		case age < 7*24*time.Hour:
			unit, name = 24*time.Hour, "daily"
		case age < 28*24*time.Hour:
			unit, name = 7*24*time.Hour, "weekly"
		default:
			continue
		}
		b := bucket{unit, int64(age / unit)}
		if !seen[b] {
			seen[b] = true
			rules[i] = append(rules[i], "exponential ("+name+")")
		}
	}
}

// calendar marks what the Calendar policy's period and age rules keep of
// fulls (MaxSize is the store's: keptBySize).
func (r Retention) calendar(fulls []Snapshot, now time.Time, rules [][]string) {
	loc := r.Location
	if loc == nil {
		loc = time.UTC
	}
	for _, p := range []struct {
		name   string
		n      int
		period func(time.Time) string
	}{
		{"hourly", r.Hourly, func(t time.Time) string { return t.Format("2006-01-02T15") }},
		{"daily", r.Daily, func(t time.Time) string { return t.Format(time.DateOnly) }},
		{"weekly", r.Weekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{"monthly", r.Monthly, func(t time.Time) string { return t.Format("2006-01") }},
		{"yearly", r.Yearly, func(t time.Time) string { return t.Format("2006") }},
	} {
		last, counted := "", 0
		// Newest first: the first full of a period is its newest.
		for i := len(fulls) - 1; i >= 0 && counted < p.n; i-- {
			if period := p.period(fulls[i].Created.In(loc)); period != last {
				last, counted = period, counted+1
				rules[i] = append(rules[i], p.name+" "+period)
			}
		}
	}
	if r.MaxAge > 0 {
		for i, f := range fulls {
			if now.Sub(f.Created) <= r.MaxAge {
				rules[i] = append(rules[i], "max-age "+r.MaxAge.String())
			}
		}
	}
}

// keptBySize is the fulls MaxSize keeps: the newest of the store's, by
// creation, as long as their chains (each full with the deltas up to the
// next full of its timeline) fit in MaxSize together.
func (r Retention) keptBySize(cat Catalog) map[string]bool {
	kept := map[string]bool{}
	if r.policy() != Calendar || r.MaxSize <= 0 {
		return kept
	}
	size := map[string]int64{}
	var fulls []Snapshot
	own := ownDeltas(cat)
	for _, s := range cat.all {
		if s.Kind == KindFull && !s.Legacy() {
			fulls = append(fulls, s)
			size[s.Key] = s.Size
			for _, d := range own[s.Key] {
				size[s.Key] += d.Size
			}
		}
	}
	slices.SortStableFunc(fulls, func(a, b Snapshot) int { return b.Created.Compare(a.Created) })
	total := int64(0)
	for _, f := range fulls {
		if total += size[f.Key]; total > r.MaxSize {
			break
		}
		kept[f.Key] = true
	}
	return kept
}

// deltaKept says whether delta d is kept, and in whose chain. Under
// Calendar a delta is in the chain of the full it follows (the newest of
// its timeline below it), kept or not: kept fulls keep their own chains,
// not those of expired fulls after them. Under the other policies it is
// in the chain of the newest kept full below it, which serves
// point-in-time restores through expired fulls, unless the pin alone
// keeps that full. A pinned full keeps its own deltas whatever the
// policy; a chain with no full kept goes; the newest kept full's stays;
// another's lives DeltaRetention (0: forever) past the next kept full.
func (r Retention) deltaKept(d Snapshot, fulls, kept []Snapshot, pinned map[string]bool, now time.Time) (Snapshot, bool) {
	i, j := ownerIndex(kept, d), ownerIndex(fulls, d)
	if j >= 0 {
		if _, ok := pinned[fulls[j].Key]; ok {
			// A pinned chain is kept whole: its own deltas.
			return fulls[j], true
		}
	}
	switch {
	case i < 0:
		return Snapshot{}, false
	case fulls[j].Key != kept[i].Key && (r.policy() == Calendar || pinned[kept[i].Key]):
		// A delta of an expired full: Calendar keeps its fulls' own
		// chains alone, and a pin keeps its own chain, not the deltas
		// of every full after it that expires (which would grow without
		// end behind an old pin, and could not be replayed from it
		// across those fulls).
		return Snapshot{}, false
	case i == len(kept)-1, r.DeltaRetention == 0:
		return kept[i], true
	}
	return kept[i], now.Sub(kept[i+1].Created) <= r.DeltaRetention
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
	// Pins are kept besides the store's own (ReadPins): a second site's
	// GC takes the first site's, so a chain pinned there is kept on both.
	Pins Pins
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
	// Kept is what the retention keeps, with the rules that keep each.
	Kept []Kept
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
	// Deletions counts the records of deletions operators asked
	// (DeleteChains) on the store.
	Deletions int
	// BundlesDeleted counts the restore bundles deleted: those no kept
	// full takes, but the newest.
	BundlesDeleted int
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
	pins, err := ReadPins(ctx, st)
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	for k, p := range opts.Pins {
		pins[k] = p
	}
	log := logger(opts.Logger)
	plan, aside, found, err := r.planChecked(ctx, st, cat, pins, opts)
	res.SetAside, res.Kept = aside, plan.Kept
	if found > 0 {
		log.Warn("retention: full snapshots that do not hold what their names say are neither counted nor deleted; delete them or take them out of the backups with "+store.ExcludeTag,
			"count", len(aside), "first", aside[0].Snapshot.Key, "why", aside[0].Why)
	}
	if err != nil {
		return res, err
	}
	if opts.DryRun {
		res.Deleted = plan.Expired
		return res, nil
	}
	// Expiry depends only on the kept snapshots, so a GC interrupted here
	// leaves nothing the next run would keep.
	d, err := deleteSnapshots(ctx, st, cat, plan.Expired, log, "snapshot deleted by retention", "policy", r.policy(), "store", fmt.Sprint(st))
	res.Deleted, res.Locked, res.KeptForLock = d.Deleted, d.Locked, d.KeptForLock
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	if res.DrillsDeleted, err = pruneDrills(ctx, st); err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	if res.BundlesDeleted, err = pruneBundles(ctx, st, res.Kept); err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	deletions, err := st.List(ctx, deletionDir+"/")
	if err != nil {
		return res, fmt.Errorf("gc: list deletions: %w", err)
	}
	res.Deletions = len(deletions)
	if len(res.Locked) > 0 {
		// Once a run, not once a snapshot: on a bucket locked for days
		// every run meets the same ones.
		log.Info("retention: expired snapshots are locked (write-once); kept, and asked again on the next run",
			"store", fmt.Sprint(st), "locked", len(res.Locked), "oldest", res.Locked[0].Key, "kept_with_their_full", len(res.KeptForLock))
	}
	return res, nil
}

// deleted is what deleteSnapshots did.
type deleted struct {
	Deleted, Locked, KeptForLock []Snapshot
}

// deleteSnapshots deletes list (in revision order: a chain's full before
// its deltas), each logged with msg and args. A delete a write-once lock
// refuses keeps the snapshot (Locked) and, for a full, its chain's deltas
// after it (KeptForLock), so that chain stays whole while its full does.
// Any other failed delete stops; what was done is returned with the error.
func deleteSnapshots(ctx context.Context, st store.Store, cat Catalog, list []Snapshot, log *slog.Logger, msg string, args ...any) (deleted, error) {
	var res deleted
	lockedChains := map[string]bool{}
	for _, s := range list {
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
			log.Debug("the snapshot is locked (write-once)", "key", s.Key)
			continue
		case err != nil:
			return res, fmt.Errorf("delete %s: %w", s.Key, err)
		}
		res.Deleted = append(res.Deleted, s)
		if s.Kind == KindFull {
			// Its chain's identity goes with it; one left over costs a
			// few bytes and misleads nobody, so a failure is not one.
			_ = st.Delete(ctx, identityKey(s))
		}
		log.Info(msg, append([]any{"key", s.Key}, args...)...)
	}
	return res, nil
}

// planChecked is r's plan once every full snapshot it keeps,
// and so lets supersede others, was checked to hold what its name says: a
// full copied or written by hand under a newer name would otherwise
// expire the real ones (and make every delta since look superseded). The
// fulls that fail are set aside and the policy runs again without them;
// found counts those this run found, not Checked. A full that cannot be
// checked (the store does not answer) stops GC: unknown is no reason to
// delete.
func (r Retention) planChecked(ctx context.Context, st store.Store, cat Catalog, pins Pins, opts GCOptions) (plan Plan, aside []SetAside, found int, err error) {
	for {
		plan = r.Plan(cat, now(opts.Now), pins)
		if len(plan.Expired) == 0 {
			return plan, aside, found, nil
		}
		gone := map[string]bool{}
		for _, s := range plan.Expired {
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
				return Plan{}, aside, found, fmt.Errorf("gc: %s is kept and would expire older snapshots, and whether it holds what its name says is not known; nothing deleted: %w", s.Key, cerr)
			case !known:
				opts.Checked.add(s.Key, nil)
			}
		}
		if len(bad) == 0 {
			return plan, aside, found, nil
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

// ownDeltas maps each full's key to the deltas of its own chain: those
// after it up to the next full of its timeline.
func ownDeltas(cat Catalog) map[string][]Snapshot {
	fulls := map[string][]Snapshot{} // by timeline, in revision order
	for _, s := range cat.all {
		if s.Kind == KindFull && !s.Legacy() {
			fulls[s.Timeline] = append(fulls[s.Timeline], s)
		}
	}
	own := map[string][]Snapshot{}
	for _, d := range cat.all {
		if d.Kind != KindDelta || d.Legacy() {
			continue
		}
		if i := ownerIndex(fulls[d.Timeline], d); i >= 0 {
			key := fulls[d.Timeline][i].Key
			own[key] = append(own[key], d)
		}
	}
	return own
}

// ownerIndex is the index in fulls (sorted by revision) of the full
// whose chain delta d continues, as fullOf finds it: the first of those
// with the newest revision below d's last; -1 when none is.
func ownerIndex(fulls []Snapshot, d Snapshot) int {
	i, _ := slices.BinarySearchFunc(fulls, d.LastRevision, func(f Snapshot, rev int64) int { return cmp.Compare(f.LastRevision, rev) })
	if i--; i < 0 {
		return -1
	}
	for i > 0 && fulls[i-1].LastRevision == fulls[i].LastRevision {
		i--
	}
	return i
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
