package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

var (
	// ErrNoFull means there is no full snapshot a chain could start from.
	ErrNoFull = errors.New("no full snapshot to start the chain from")
	// ErrNotCovered means the backups do not reach the wanted revision or time.
	ErrNotCovered = errors.New("not covered by the backups")
	// ErrNotABackup: an object named as a snapshot holds something else
	// than its name says.
	ErrNotABackup = errors.New("not the backup its name says")
)

// Catalog is a store's snapshots as one of its timelines sees them: the
// objects of that timeline, and those of the timelines it forked from up
// to the revision it forked at (inherited, so a past both share stays
// addressable), sorted by revision. Chains are built from them only:
// a timeline's deltas never continue another's fulls.
type Catalog struct {
	// Snapshots are the timeline's, sorted by revision.
	Snapshots []Snapshot
	// Timeline is the one the catalog reads; Timelines are every one of
	// the store's, the first first, then in the order they began.
	Timeline  Timeline
	Timelines []Timeline
	// all is every object of the store, each with its timeline.
	all []Snapshot
	// ceiling is, for an inherited object's key, the last revision the
	// catalog's timeline shares with the object's.
	ceiling map[string]int64
	// Excluded are the snapshots an operator took out of the backups
	// (store.ExcludeTag), asked only of a store that lists no other: a
	// store whose every backup is hidden must not read as a new one.
	Excluded []Snapshot
	// SetAside are timeline records named far past when the store says
	// they were written, holding no snapshot (Reason says so): not one of
	// the store's timelines.
	SetAside []Timeline
}

// List reads the catalog of st, as its newest timeline sees it: the v2
// layout and the legacy v1 one (objects there whose names are not
// snapshot names are skipped), and the timeline records. On reads it as
// another timeline does.
func List(ctx context.Context, st store.Store) (Catalog, error) {
	var all []Snapshot
	for _, dir := range []string{dirV2, dirV1} {
		objs, err := st.List(ctx, dir+"/")
		if err != nil {
			return Catalog{}, fmt.Errorf("list snapshots: %w", err)
		}
		for _, o := range objs {
			s, err := Parse(o.Key)
			if err != nil {
				continue
			}
			s.Size = o.Size
			all = append(all, s)
		}
	}
	tls, err := listTimelines(ctx, st)
	if err != nil {
		return Catalog{}, err
	}
	c := newCatalog(all, tls)
	if len(all) == 0 {
		objs, err := store.ListExcluded(ctx, st, dirV2+"/")
		if err != nil {
			return Catalog{}, fmt.Errorf("list snapshots: %w", err)
		}
		for _, o := range objs {
			if s, err := Parse(o.Key); err == nil {
				c.Excluded = append(c.Excluded, s)
			}
		}
	}
	return c, nil
}

// NewCatalog sorts snapshots into a catalog of one timeline, the first.
func NewCatalog(snaps []Snapshot) Catalog {
	return newCatalog(slices.Clone(snaps), []Timeline{{ID: FirstTimeline}})
}

// newCatalog places each object in its timeline (the v1 layout is the
// first's: etcdkit never writes it) and reads the newest.
func newCatalog(all []Snapshot, tls []Timeline) Catalog {
	tls, aside := setAside(all, tls)
	for i, s := range all {
		all[i].Timeline = FirstTimeline
		if !s.Legacy() {
			all[i].Timeline = timelineOf(tls, s)
		}
	}
	sortSnapshots(all)
	c := Catalog{Timelines: tls, all: all, SetAside: aside}
	c, _ = c.On("")
	return c
}

// setAside takes out of tls the records named more than maxRecordAhead
// past when they were written that hold no snapshot. Each would be the
// newest timeline until long after its writer stopped: a restore would
// find nothing on it, and a cluster could begin no timeline after it. A
// writer whose clock runs that far ahead names its snapshots as far
// ahead, so a record of a real timeline keeps it once it holds one.
func setAside(all []Snapshot, tls []Timeline) (kept, aside []Timeline) {
	kept = tls[:1:1]
	for i, t := range tls[1:] {
		written := t.written
		if written.IsZero() {
			written = time.Now()
		}
		holds := slices.ContainsFunc(all, func(s Snapshot) bool { return !s.Legacy() && timelineOf(tls, s) == t.ID })
		if holds || !t.Began.After(written.Add(maxRecordAhead)) {
			kept = append(kept, tls[i+1])
			continue
		}
		t.Reason = fmt.Sprintf("set aside: named %s, %s after the store says it was written (%s), and it holds no snapshot; delete %s",
			t.Began.Format(time.RFC3339), t.Began.Sub(written).Round(time.Second), written.UTC().Format(time.RFC3339), t.Key)
		aside = append(aside, t)
	}
	return kept, aside
}

// ExcludeMark says how an operator takes a snapshot out of the backups on
// each store, for messages.
const ExcludeMark = store.ExcludeTag + "=true (GCS metadata, an Azure blob index tag, on S3 a tag on the first version under a delete marker)"

// TimelineEnd is how far one timeline's own backups reach.
type TimelineEnd struct {
	Timeline     Timeline
	LastRevision int64
}

// Beyond are the store's other timelines whose own backups reach past
// revision rev, the newest first: what a restore of this timeline to rev
// leaves out. Revisions of two timelines are no measure of which is
// right (a fork restarts from an earlier one), but a newest timeline
// that reaches less far than an older one is what an operator must see:
// a rollback made on purpose, or a record that should not be there.
func (c Catalog) Beyond(rev int64) []TimelineEnd {
	var out []TimelineEnd
	for i := len(c.Timelines) - 1; i >= 0; i-- {
		t := c.Timelines[i]
		if t.ID == c.Timeline.ID {
			continue
		}
		end := TimelineEnd{Timeline: t}
		for _, s := range c.all {
			if s.Timeline == t.ID {
				end.LastRevision = max(end.LastRevision, s.LastRevision)
			}
		}
		if end.LastRevision > rev {
			out = append(out, end)
		}
	}
	return out
}

// On is the catalog as timeline id sees it ("": the newest).
func (c Catalog) On(id string) (Catalog, error) {
	if id == "" {
		id = c.Timelines[len(c.Timelines)-1].ID
	}
	t, ok := c.FindTimeline(id)
	if !ok {
		ids := make([]string, len(c.Timelines))
		for i, t := range c.Timelines {
			ids[i] = t.ID
		}
		return c, fmt.Errorf("timeline %q: %w (the store has %s)", id, ErrNoTimeline, strings.Join(ids, ", "))
	}
	out := Catalog{Timeline: t, Timelines: c.Timelines, all: c.all, ceiling: map[string]int64{}, Excluded: c.Excluded, SetAside: c.SetAside}
	// Walk up the forks: each ancestor lends what it holds up to the
	// lowest fork revision on the way.
	ceiling := int64(0)
	for depth := 0; depth <= len(c.Timelines); depth++ {
		for _, s := range c.all {
			if s.Timeline != t.ID {
				continue
			}
			switch {
			case depth == 0:
			case s.Kind == KindFull && s.LastRevision > ceiling, s.Kind == KindDelta && s.StartRevision > ceiling:
				continue
			default:
				out.ceiling[s.Key] = ceiling
			}
			out.Snapshots = append(out.Snapshots, s)
		}
		if t.Parent == "" || t.ForkRevision <= 0 {
			break
		}
		if ceiling == 0 || t.ForkRevision < ceiling {
			ceiling = t.ForkRevision
		}
		if t, ok = c.FindTimeline(t.Parent); !ok {
			break
		}
	}
	sortSnapshots(out.Snapshots)
	return out, nil
}

// FindTimeline is the catalog's timeline id, if the store holds it.
func (c Catalog) FindTimeline(id string) (Timeline, bool) {
	for _, t := range c.Timelines {
		if t.ID == id {
			return t, true
		}
	}
	return Timeline{}, false
}

// All is every object of the store, of every timeline, sorted by revision.
func (c Catalog) All() []Snapshot { return c.all }

// NewestRevision is the newest revision any of the store's backups holds,
// on any timeline: a cluster restored to an earlier one must start past
// it before it backs up to the same store, or a reader that knows no
// timelines (etcd-backup-restore takes the full snapshot with the highest
// revision and every delta named past it) mixes the timelines.
func (c Catalog) NewestRevision() int64 {
	var newest int64
	for _, s := range c.all {
		newest = max(newest, s.LastRevision)
	}
	return newest
}

// Newest says whether the catalog reads the store's newest timeline.
func (c Catalog) Newest() bool { return c.Timeline.ID == c.Timelines[len(c.Timelines)-1].ID }

// AllChains are the chains of every timeline (Chains of each), the first
// timeline's first.
func (c Catalog) AllChains() []Chain {
	var out []Chain
	for _, t := range c.Timelines {
		on, _ := c.On(t.ID)
		out = append(out, on.Chains()...)
	}
	return out
}

// Own are the snapshots of the catalog's timeline itself, not inherited.
func (c Catalog) Own() []Snapshot {
	return slices.DeleteFunc(slices.Clone(c.Snapshots), func(s Snapshot) bool { return s.Timeline != c.Timeline.ID })
}

// sortSnapshots orders by revision, numerically (names sort wrongly as
// strings once revisions pass eight digits), then by creation.
func sortSnapshots(c []Snapshot) {
	slices.SortStableFunc(c, compareSnapshots)
}

// compareSnapshots orders by revision, then creation and key.
func compareSnapshots(a, b Snapshot) int {
	return cmp.Or(
		cmp.Compare(a.LastRevision, b.LastRevision),
		cmp.Compare(a.StartRevision, b.StartRevision),
		a.Created.Compare(b.Created),
		strings.Compare(a.Key, b.Key),
	)
}

// Fulls are the catalog's full snapshots, oldest revision first.
func (c Catalog) Fulls() []Snapshot {
	return slices.DeleteFunc(slices.Clone(c.Snapshots), func(s Snapshot) bool { return s.Kind != KindFull })
}

// Latest is the chain of the newest full snapshot and every delta after it.
func (c Catalog) Latest() (Chain, error) {
	fulls := c.Fulls()
	switch {
	case len(c.Snapshots) == 0 && len(c.Excluded) > 0:
		return Chain{}, fmt.Errorf("latest chain of %s: %w: every snapshot the store holds (%d, such as %s) is taken out of the backups with %s; "+
			"remove the mark (on S3 the tag and the delete marker over it) from those to restore from", c.Timeline, ErrNoFull, len(c.Excluded), c.Excluded[len(c.Excluded)-1].Key, store.ExcludeTag)
	case len(c.Snapshots) == 0 && len(c.all) > 0:
		older := c.Timelines[0].ID
		for _, s := range c.all {
			older = s.Timeline
		}
		why := ""
		if c.Timeline.Reason != "" {
			why = " (" + c.Timeline.Reason + ")"
		}
		return Chain{}, fmt.Errorf("latest chain of %s: %w: it holds no backups yet%s, and shares none of another's; the store's other timelines hold %d (list shows them): --timeline %s restores from the one that holds the newest revision",
			c.Timeline, ErrNoFull, why, len(c.all), older)
	case len(c.Snapshots) == 0:
		return Chain{}, fmt.Errorf("latest chain of %s: %w: the store holds no backups at all (is its URL the one the backups went to?)", c.Timeline, ErrNoFull)
	case len(fulls) == 0:
		return Chain{}, fmt.Errorf("latest chain of %s: %w (%d deltas without one)", c.Timeline, ErrNoFull, len(c.Snapshots))
	}
	return c.chainFrom(fulls[len(fulls)-1]), nil
}

// ContainingRevision is the chain that reaches rev from the newest full
// snapshot at or below it; UntilRevision is set to rev.
func (c Catalog) ContainingRevision(rev int64) (Chain, error) {
	var full *Snapshot
	for i, s := range c.Snapshots {
		if s.Kind == KindFull && s.LastRevision <= rev {
			full = &c.Snapshots[i]
		}
	}
	if full == nil {
		return Chain{}, fmt.Errorf("chain for revision %d of %s: %w at or below it", rev, c.Timeline, ErrNoFull)
	}
	ch := c.chainFrom(*full)
	if last := ch.LastRevision(); last < rev {
		if ch.Ceiling > 0 {
			own := "it has no full snapshot of its own yet"
			if i := slices.IndexFunc(c.Snapshots, func(s Snapshot) bool { return s.Kind == KindFull && s.Timeline == c.Timeline.ID }); i >= 0 {
				own = fmt.Sprintf("its own backups begin at revision %d", c.Snapshots[i].LastRevision)
			}
			return Chain{}, fmt.Errorf("chain for revision %d of %s: %w: it shares revisions up to %d with timeline %s, and %s (the other timeline's revision %d: --timeline %s)",
				rev, c.Timeline, ErrNotCovered, ch.Ceiling, ch.Timeline, own, rev, ch.Timeline)
		}
		return Chain{}, fmt.Errorf("chain for revision %d of %s: %w: the newest backed-up revision is %d", rev, c.Timeline, ErrNotCovered, last)
	}
	ch.UntilRevision = rev
	ch.Deltas = trimAfter(ch.Deltas, func(d Snapshot) bool { return d.StartRevision > rev })
	return ch, nil
}

// AsOf is the chain for the state at time t: the newest full snapshot
// created at or before t, with the deltas up to the first one created after
// t (its older events may precede t). UntilTime is set to t; a restore cuts
// the events after it. The deltas end at the first gap: an upload that was
// lost (its sidecar stopped before it was written) ends what the backups
// hold of that time, as a delta not yet written ends it at the head, and
// the state is the newest they hold at or before t.
func (c Catalog) AsOf(t time.Time) (Chain, error) {
	var full *Snapshot
	for i, s := range c.Snapshots {
		if s.Kind == KindFull && !s.Created.After(t) && (full == nil || !s.Created.Before(full.Created)) {
			full = &c.Snapshots[i]
		}
	}
	if full == nil {
		return Chain{}, fmt.Errorf("chain as of %s of %s: %w created by then", t.UTC().Format(time.RFC3339), c.Timeline, ErrNoFull)
	}
	ch := c.chainFrom(*full)
	ch.UntilTime = t
	next := full.LastRevision + 1
	for i, d := range ch.Deltas {
		if d.StartRevision > next {
			ch.Deltas = ch.Deltas[:i]
			break
		}
		if d.Created.After(t) {
			ch.Deltas = ch.Deltas[:i+1]
			break
		}
		next = max(next, d.LastRevision+1)
	}
	return ch, nil
}

// Continuing are the deltas that continue, from revision rev, a database
// built from full: every delta past rev in full's layout, in replay
// order, up to the first gap. A follower replays them whichever chain
// they belong to: a chain's deltas go on past the next full.
func (c Catalog) Continuing(full Snapshot, rev int64) []Snapshot {
	from := full
	from.LastRevision = rev
	var out []Snapshot
	for _, d := range c.chainFrom(from).Deltas {
		if d.LastRevision <= rev {
			continue
		}
		if d.StartRevision > rev+1 {
			break
		}
		out = append(out, d)
		rev = d.LastRevision
	}
	return out
}

// chainFrom is full plus every delta of its timeline past its revision,
// in replay order; an inherited full's chain ends where the catalog's
// timeline forked.
func (c Catalog) chainFrom(full Snapshot) Chain {
	if full.Timeline == "" {
		// A full named from elsewhere (a standby's state file).
		full.Timeline = c.Timeline.ID
		if i := slices.IndexFunc(c.all, func(s Snapshot) bool { return s.Key == full.Key }); i >= 0 {
			full.Timeline = c.all[i].Timeline
		}
	}
	ch := Chain{Full: full, Timeline: full.Timeline, Ceiling: c.ceiling[full.Key]}
	for _, s := range c.Snapshots {
		if s.Kind == KindDelta && s.Timeline == full.Timeline && s.LastRevision > full.LastRevision && sameLayout(s, full) {
			ch.Deltas = append(ch.Deltas, s)
		}
	}
	slices.SortStableFunc(ch.Deltas, func(a, b Snapshot) int {
		// Of two deltas that start together, the longer replaces the other.
		return cmp.Or(cmp.Compare(a.StartRevision, b.StartRevision), cmp.Compare(b.LastRevision, a.LastRevision))
	})
	return ch
}

// sameLayout keeps v2 chains to v2 deltas and a v1 chain to the deltas of
// its own Backup-<unix> directory.
func sameLayout(s, full Snapshot) bool {
	if full.Legacy() {
		return path.Dir(s.Key) == path.Dir(full.Key)
	}
	return !s.Legacy()
}

func trimAfter(deltas []Snapshot, after func(Snapshot) bool) []Snapshot {
	for i, d := range deltas {
		if after(d) {
			return deltas[:i]
		}
	}
	return deltas
}

// Chain is one full snapshot and the deltas replayed on top of it.
type Chain struct {
	Full   Snapshot
	Deltas []Snapshot
	// Timeline is the timeline its objects belong to.
	Timeline string
	// Ceiling, when not 0, is the last revision the chain may give: it is
	// inherited by a timeline that forked from its own there, and what its
	// objects hold past that is the other past.
	Ceiling int64
	// UntilRevision, when not 0, is the last revision to restore.
	UntilRevision int64
	// UntilTime, when not zero, excludes events received after it.
	UntilTime time.Time
}

// LastRevision is the newest revision the chain's objects hold, up to its
// ceiling.
func (c Chain) LastRevision() int64 {
	last := c.Full.LastRevision
	for _, d := range c.Deltas {
		last = max(last, d.LastRevision)
	}
	if c.Ceiling > 0 {
		last = min(last, c.Ceiling)
	}
	return last
}

// Snapshots are the full snapshot and then the deltas.
func (c Chain) Snapshots() []Snapshot {
	return append([]Snapshot{c.Full}, c.Deltas...)
}

// Gap is a range of revisions no snapshot of a chain holds.
type Gap struct {
	From, To int64
}

func (g Gap) String() string { return fmt.Sprintf("%d-%d", g.From, g.To) }

// GapError lists the revisions a chain is missing.
type GapError struct {
	Chain Chain
	Gaps  []Gap
}

func (e *GapError) Error() string {
	gaps := make([]string, len(e.Gaps))
	for i, g := range e.Gaps {
		gaps[i] = g.String()
	}
	return fmt.Sprintf("chain from %s misses revisions %s: restore an earlier revision or take a full snapshot", e.Chain.Full.Key, strings.Join(gaps, ", "))
}

// Check returns the chain ready to replay: deltas wholly covered by what
// precedes them dropped (two uploaders may overlap after a leader handoff;
// a revision always holds the same events, so a partial overlap is kept
// and its covered revisions skipped by the replay). It fails with ErrNoFull
// when the chain has no full snapshot and with a *GapError when revisions up
// to the chain's end (or UntilRevision) are missing.
func (c Chain) Check() (Chain, error) {
	if c.Full.Kind != KindFull || c.Full.Key == "" {
		return Chain{}, fmt.Errorf("chain of %d deltas: %w (it was deleted or never written)", len(c.Deltas), ErrNoFull)
	}
	// An inherited chain is restored to where the timeline forked, unless
	// a time asks for less (the replay stops at the ceiling either way).
	if c.Ceiling > 0 && c.UntilTime.IsZero() && (c.UntilRevision == 0 || c.UntilRevision > c.Ceiling) {
		c.UntilRevision = c.Ceiling
	}
	out := c
	out.Deltas = nil
	var gaps []Gap
	covered := c.Full.LastRevision
	for _, d := range c.Deltas {
		if c.UntilRevision != 0 && covered >= c.UntilRevision {
			break
		}
		if d.LastRevision <= covered {
			continue
		}
		if d.StartRevision > covered+1 {
			gaps = append(gaps, Gap{From: covered + 1, To: d.StartRevision - 1})
		}
		out.Deltas = append(out.Deltas, d)
		covered = d.LastRevision
	}
	if c.UntilRevision > covered {
		gaps = append(gaps, Gap{From: covered + 1, To: c.UntilRevision})
	}
	if len(gaps) > 0 {
		return Chain{}, &GapError{Chain: c, Gaps: gaps}
	}
	return out, nil
}

// Chains is the catalog's timeline as an operator reads it: each full
// snapshot of its own, oldest first, with the deltas that follow it up to
// the next one's revision. Chains are not checked for gaps; Check does.
func (c Catalog) Chains() []Chain {
	fulls := slices.DeleteFunc(c.Fulls(), func(s Snapshot) bool { return s.Timeline != c.Timeline.ID })
	out := make([]Chain, 0, len(fulls))
	for i, f := range fulls {
		ch := c.chainFrom(f)
		if i+1 < len(fulls) {
			next := fulls[i+1].LastRevision
			ch.Deltas = slices.DeleteFunc(ch.Deltas, func(d Snapshot) bool { return d.StartRevision > next })
		}
		out = append(out, ch)
	}
	return out
}
