package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// ErrNewestChain: the chain a restore uses now is never deleted by hand.
var ErrNewestChain = errors.New("the newest chain is the one a restore uses")

// DeleteOptions say which chains DeleteChains deletes: those of Keys, and
// every chain older than Before.
type DeleteOptions struct {
	// Keys name full snapshots; each goes with its chain (the deltas
	// after it up to the next full). A delta, the newest chain or a
	// pinned chain is refused, and then nothing is deleted.
	Keys []string
	// Before: every chain whose newest object was written before it,
	// but the newest chain and pinned chains, which are spared. Zero:
	// none.
	Before time.Time
	// DryRun lists what would be deleted and deletes nothing.
	DryRun bool
	// By says who asks (user@host), in the record of the deletion.
	By string
	// Logger: nil discards. Each snapshot deleted is logged.
	Logger *slog.Logger
}

// DeleteResult is what DeleteChains did (with DryRun: would do).
type DeleteResult struct {
	Deleted []Snapshot
	// Locked and KeptForLock are as GC's: a write-once lock kept them.
	Locked, KeptForLock []Snapshot
	// Spared are the fulls older than Before that were kept, and why:
	// "newest chain" or the pin.
	Spared []Kept
	// Record is the key of the deletion's record.
	Record string
}

// Deletion is the record of one DeleteChains, written under etcdkit/deletions
// before anything is deleted: who asked, when, why, and which
// snapshots.
type Deletion struct {
	At        time.Time `json:"at"`
	By        string    `json:"by,omitempty"`
	Reason    string    `json:"reason"`
	Snapshots []string  `json:"snapshots"`
}

// DeleteChains deletes the chains opts names, by an operator's hand: never the
// newest chain, never a pinned one, never the read-only v1 layout. A
// record of the deletion is written first; each delete is logged.
func DeleteChains(ctx context.Context, st store.Store, opts DeleteOptions) (DeleteResult, error) {
	var res DeleteResult
	if len(opts.Keys) == 0 && opts.Before.IsZero() {
		return res, errors.New("delete: name full snapshots, or a time to delete the chains before")
	}
	cat, err := List(ctx, st)
	if err != nil {
		return res, err
	}
	pins, err := ReadPins(ctx, st)
	if err != nil {
		return res, fmt.Errorf("delete: %w", err)
	}
	list, reasons, err := toDelete(cat, pins, opts, &res)
	if err != nil {
		return res, err
	}
	if opts.DryRun || len(list) == 0 {
		res.Deleted = list
		return res, nil
	}
	rec := Deletion{At: time.Now().UTC(), By: opts.By, Reason: strings.Join(reasons, "; "), Snapshots: make([]string, 0, len(list))}
	for _, s := range list {
		rec.Snapshots = append(rec.Snapshots, s.Key)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	res.Record = fmt.Sprintf("%s/%s-%s.json", deletionDir, rec.At.Format("20060102T150405Z"), hex.EncodeToString(b[:]))
	if err := putJSON(ctx, st, res.Record, rec); err != nil {
		return res, fmt.Errorf("delete: the record of the deletion: %w; nothing deleted", err)
	}
	d, err := deleteSnapshots(ctx, st, cat, list, logger(opts.Logger), "snapshot deleted by an operator", "by", opts.By, "record", res.Record)
	res.Deleted, res.Locked, res.KeptForLock = d.Deleted, d.Locked, d.KeptForLock
	if err != nil {
		return res, fmt.Errorf("delete: %w", err)
	}
	return res, nil
}

// toDelete is what opts names, in revision order (each full before its
// deltas), and why; the chains before opts.Before that are spared go
// into res.
func toDelete(cat Catalog, pins Pins, opts DeleteOptions, res *DeleteResult) ([]Snapshot, []string, error) {
	newest := newestFull(cat)
	chose := map[string]bool{}
	var reasons []string
	for _, key := range opts.Keys {
		s, ok := find(cat, key)
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("delete %s: %w (etcd-backup list shows the keys)", key, store.ErrNotFound)
		case s.Legacy():
			return nil, nil, fmt.Errorf("delete %s: it is in the read-only v1 layout, which etcdkit never deletes", key)
		case s.Kind != KindFull:
			full, _ := fullOf(cat, s)
			return nil, nil, fmt.Errorf("delete %s: a delta goes with its chain; name its full (%s) to delete the chain", key, full.Key)
		case s.Key == newest.Key:
			return nil, nil, fmt.Errorf("delete %s: %w; take a new full first (etcd-backup snapshot), then delete this one", key, ErrNewestChain)
		}
		if p, ok := pins[s.Key]; ok {
			return nil, nil, fmt.Errorf("delete %s: %w%s; etcd-backup unpin it first", key, ErrPinned, pinLabel(p))
		}
		chose[s.Key] = true
	}
	if len(opts.Keys) > 0 {
		reasons = append(reasons, "named")
	}
	own := ownDeltas(cat)
	if !opts.Before.IsZero() {
		reasons = append(reasons, "before "+opts.Before.UTC().Format(time.RFC3339))
		for _, full := range cat.all {
			if full.Kind != KindFull || full.Legacy() || !full.Created.Before(opts.Before) ||
				slices.ContainsFunc(own[full.Key], func(d Snapshot) bool { return !d.Created.Before(opts.Before) }) {
				continue
			}
			switch p, pinned := pins[full.Key]; {
			case full.Key == newest.Key:
				res.Spared = append(res.Spared, Kept{Snapshot: full, Rules: []string{"newest chain"}})
			case pinned:
				res.Spared = append(res.Spared, Kept{Snapshot: full, Rules: []string{p.rule()}})
			default:
				chose[full.Key] = true
			}
		}
	}
	var list []Snapshot
	for _, s := range cat.all {
		if chose[s.Key] {
			list = append(list, s)
			list = append(list, own[s.Key]...)
		}
	}
	return list, reasons, nil
}

// ReadDeletions reads the records of every DeleteChains on st, oldest first.
func ReadDeletions(ctx context.Context, st store.Store) ([]Deletion, error) {
	objs, err := st.List(ctx, deletionDir+"/")
	if err != nil {
		return nil, fmt.Errorf("list deletions: %w", err)
	}
	var out []Deletion
	for _, o := range objs {
		d, ok, err := getJSON[Deletion](ctx, st, o.Key)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// newestFull is the full of the chain a restore uses: the newest
// timeline's newest.
func newestFull(cat Catalog) Snapshot {
	tl := cat.Timelines[len(cat.Timelines)-1].ID
	var newest Snapshot
	for _, s := range cat.all {
		if s.Kind == KindFull && !s.Legacy() && s.Timeline == tl {
			newest = s
		}
	}
	return newest
}

func find(cat Catalog, key string) (Snapshot, bool) {
	i := slices.IndexFunc(cat.all, func(s Snapshot) bool { return s.Key == key })
	if i < 0 {
		return Snapshot{}, false
	}
	return cat.all[i], true
}

// pinLabel is a pin's label as an error names it.
func pinLabel(p Pin) string {
	if p.Label == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", p.Label)
}
