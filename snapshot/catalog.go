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
)

// Catalog is every snapshot of a store, sorted by revision.
type Catalog []Snapshot

// List reads the catalog of st: the v2 layout and the legacy v1 one.
// Objects there whose names are not snapshot names are skipped.
func List(ctx context.Context, st store.Store) (Catalog, error) {
	var cat Catalog
	for _, dir := range []string{dirV2, dirV1} {
		objs, err := st.List(ctx, dir+"/")
		if err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		for _, o := range objs {
			s, err := Parse(o.Key)
			if err != nil {
				continue
			}
			s.Size = o.Size
			cat = append(cat, s)
		}
	}
	cat.sort()
	return cat, nil
}

// NewCatalog sorts snapshots into a catalog.
func NewCatalog(snaps []Snapshot) Catalog {
	cat := slices.Clone(Catalog(snaps))
	cat.sort()
	return cat
}

// sort orders by revision, numerically (names sort wrongly as strings once
// revisions pass eight digits), then by creation.
func (c Catalog) sort() {
	slices.SortStableFunc(c, func(a, b Snapshot) int {
		return cmp.Or(
			cmp.Compare(a.LastRevision, b.LastRevision),
			cmp.Compare(a.StartRevision, b.StartRevision),
			a.Created.Compare(b.Created),
			strings.Compare(a.Key, b.Key),
		)
	})
}

// Fulls are the catalog's full snapshots, oldest revision first.
func (c Catalog) Fulls() []Snapshot {
	return slices.DeleteFunc(slices.Clone(c), func(s Snapshot) bool { return s.Kind != KindFull })
}

// Latest is the chain of the newest full snapshot and every delta after it.
func (c Catalog) Latest() (Chain, error) {
	fulls := c.Fulls()
	if len(fulls) == 0 {
		return Chain{}, fmt.Errorf("latest chain: %w (%d deltas without one)", ErrNoFull, len(c))
	}
	return c.chainFrom(fulls[len(fulls)-1]), nil
}

// ContainingRevision is the chain that reaches rev from the newest full
// snapshot at or below it; UntilRevision is set to rev.
func (c Catalog) ContainingRevision(rev int64) (Chain, error) {
	var full *Snapshot
	for i, s := range c {
		if s.Kind == KindFull && s.LastRevision <= rev {
			full = &c[i]
		}
	}
	if full == nil {
		return Chain{}, fmt.Errorf("chain for revision %d: %w at or below it", rev, ErrNoFull)
	}
	ch := c.chainFrom(*full)
	if last := ch.LastRevision(); last < rev {
		return Chain{}, fmt.Errorf("chain for revision %d: %w: the newest backed-up revision is %d", rev, ErrNotCovered, last)
	}
	ch.UntilRevision = rev
	ch.Deltas = trimAfter(ch.Deltas, func(d Snapshot) bool { return d.StartRevision > rev })
	return ch, nil
}

// AsOf is the chain for the state at time t: the newest full snapshot
// created at or before t, with the deltas up to the first one created after
// t (its older events may precede t). UntilTime is set to t; a restore cuts
// the events after it.
func (c Catalog) AsOf(t time.Time) (Chain, error) {
	var full *Snapshot
	for i, s := range c {
		if s.Kind == KindFull && !s.Created.After(t) && (full == nil || !s.Created.Before(full.Created)) {
			full = &c[i]
		}
	}
	if full == nil {
		return Chain{}, fmt.Errorf("chain as of %s: %w created by then", t.UTC().Format(time.RFC3339), ErrNoFull)
	}
	ch := c.chainFrom(*full)
	ch.UntilTime = t
	for i, d := range ch.Deltas {
		if d.Created.After(t) {
			ch.Deltas = ch.Deltas[:i+1]
			break
		}
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

// chainFrom is full plus every delta past its revision, in replay order.
func (c Catalog) chainFrom(full Snapshot) Chain {
	ch := Chain{Full: full}
	for _, s := range c {
		if s.Kind == KindDelta && s.LastRevision > full.LastRevision && sameLayout(s, full) {
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
	// UntilRevision, when not 0, is the last revision to restore.
	UntilRevision int64
	// UntilTime, when not zero, excludes events received after it.
	UntilTime time.Time
}

// LastRevision is the newest revision the chain's objects hold.
func (c Chain) LastRevision() int64 {
	last := c.Full.LastRevision
	for _, d := range c.Deltas {
		last = max(last, d.LastRevision)
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

// Chains is the catalog as an operator reads it: each full snapshot, oldest
// first, with the deltas that follow it up to the next full snapshot's
// revision. Chains are not checked for gaps; Check does that.
func (c Catalog) Chains() []Chain {
	fulls := c.Fulls()
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
