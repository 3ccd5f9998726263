package view

import (
	"context"
	"fmt"

	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// SnapshotOf shows a snapshot.
func SnapshotOf(s snapshot.Snapshot) api.SnapshotView {
	return api.SnapshotView{Key: s.Key, Kind: string(s.Kind), StartRevision: s.StartRevision, LastRevision: s.LastRevision,
		Created: s.Created.UTC(), Size: s.Size, Compression: string(s.Compression), Encrypted: s.Encrypted}
}

// ChainOf shows a chain from its names alone.
func ChainOf(c snapshot.Chain) api.ChainView {
	v := api.ChainView{Timeline: c.Timeline, Full: SnapshotOf(c.Full), Deltas: []api.SnapshotView{}, LastRevision: c.LastRevision(), Size: c.Full.Size}
	for _, d := range c.Deltas {
		v.Deltas = append(v.Deltas, SnapshotOf(d))
		v.Size += d.Size
	}
	return v
}

// PinOf shows a pin.
func PinOf(p snapshot.Pin) api.PinView {
	return api.PinView{Snapshot: p.Snapshot, Label: p.Label, Created: p.Created.UTC(), By: p.By}
}

// PinFor is the pin of the chain full begins, nil when it has none.
func PinFor(pins snapshot.Pins, full string) *api.PinView {
	p, ok := pins[full]
	if !ok {
		return nil
	}
	v := PinOf(p)
	return &v
}

// TimelinesOf shows the catalog's timelines, the first first, then those
// set aside.
func TimelinesOf(cat snapshot.Catalog) []api.TimelineView {
	out := make([]api.TimelineView, 0, len(cat.Timelines)+len(cat.SetAside))
	for i, t := range cat.Timelines {
		out = append(out, timeline(t))
		out[len(out)-1].Newest = i == len(cat.Timelines)-1
	}
	for _, t := range cat.SetAside {
		out = append(out, timeline(t))
		out[len(out)-1].SetAside = true
	}
	return out
}

func timeline(t snapshot.Timeline) api.TimelineView {
	return api.TimelineView{ID: t.ID, Began: t.Began, Parent: t.Parent, ForkRevision: t.ForkRevision,
		ForkSnapshot: t.ForkSnapshot, ClusterID: t.ClusterID, Reason: t.Reason}
}

// Chain is a chain as list and fleet show it: its names, identity,
// problem and restore estimate.
type Chain struct {
	api.ChainView
	// Problem says what keeps the chain from being restored whole, from
	// its names (a gap, a delta that does not continue it).
	Problem string `json:"problem,omitempty"`
	// EstimatedRestore is restore.EstimateRestore at the speed Read was
	// given.
	EstimatedRestore float64 `json:"estimated_restore_seconds"`
	// Source and Logical: a chain of a datastore behind etcd's API, whose
	// full holds its keys at one revision alone.
	Source  snapshot.SourceKind `json:"source,omitempty"`
	Logical *snapshot.Logical   `json:"logical,omitempty"`
}

// Read shows chain c of st, restores estimated at speed (the zero
// Speed is the bench machine's, halved). The view is whole when err is
// not nil: err says only that the chain's identity record could not be
// read, which a caller may show or leave out.
func Read(ctx context.Context, st store.Store, c snapshot.Chain, speed restore.Speed) (Chain, error) {
	out := Chain{ChainView: ChainOf(c), EstimatedRestore: restore.EstimateRestore(c, speed).Seconds()}
	if _, err := c.Check(); err != nil {
		out.Problem = err.Error()
	}
	id, ok, err := snapshot.ReadIdentity(ctx, st, c.Full)
	if err != nil {
		return out, fmt.Errorf("identity of %s: %w", c.Full.Key, err)
	}
	if ok {
		out.ClusterID, out.Source, out.Logical = id.ClusterID, id.Source, id.Logical
	}
	return out, nil
}
