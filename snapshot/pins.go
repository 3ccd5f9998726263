package snapshot

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// ErrPinned: a pinned chain cannot be deleted; unpin it first.
var ErrPinned = errors.New("the chain is pinned")

// Pin keeps a full snapshot and its whole chain whatever the retention
// (GC and DeleteChains leave it), until it is unpinned: an operator's mark,
// with an optional label ("before-upgrade-1.34").
type Pin struct {
	// Snapshot is the full's key.
	Snapshot string    `json:"snapshot"`
	Label    string    `json:"label,omitempty"`
	Created  time.Time `json:"created"`
	// By says who pinned it (user@host), as the pinning command knew.
	By string `json:"by,omitempty"`
}

// Pins are a store's pins, by the full's key.
type Pins map[string]Pin

// rule is how a plan names what a pin keeps.
func (p Pin) rule() string {
	if p.Label == "" {
		return "pinned"
	}
	return "pinned: " + p.Label
}

func pinKey(full Snapshot) string {
	return fmt.Sprintf("%s/Full-%08d-%08d-%d.json", pinDir, full.StartRevision, full.LastRevision, full.Created.Unix())
}

// ReadPins reads st's pins. A record that is not one etcdkit writes is
// an error: unknown is no reason to delete.
func ReadPins(ctx context.Context, st store.Store) (Pins, error) {
	objs, err := st.List(ctx, pinDir+"/")
	if err != nil {
		return nil, fmt.Errorf("list pins: %w", err)
	}
	pins := Pins{}
	for _, o := range objs {
		if path.Ext(o.Key) != ".json" {
			continue
		}
		p, ok, err := getJSON[Pin](ctx, st, o.Key)
		if err != nil {
			return nil, fmt.Errorf("pin %s: %w", o.Key, err)
		}
		if ok {
			pins[p.Snapshot] = p
		}
	}
	return pins, nil
}

// PinChain pins the chain snapshot key is in (a full, or a delta of its
// chain: its full is pinned) with label, and returns the pin. A chain
// pinned already keeps its pin and label: the error says so.
func PinChain(ctx context.Context, st store.Store, cat Catalog, key, label, by string) (Pin, error) {
	full, err := chainFull(cat, key)
	if err != nil {
		return Pin{}, err
	}
	p := Pin{Snapshot: full.Key, Label: label, Created: time.Now().UTC(), By: by}
	err = putJSON(ctx, st, pinKey(full), p)
	if errors.Is(err, ErrConflict) {
		old, _, gerr := getJSON[Pin](ctx, st, pinKey(full))
		if gerr != nil {
			return Pin{}, gerr
		}
		return old, fmt.Errorf("%s is pinned already (label %q, since %s): unpin it first to change its label",
			full.Key, old.Label, old.Created.Format(time.RFC3339))
	}
	return p, err
}

// Unpin takes the pin off the chain of snapshot key, and says whether it
// had one. A chain without a pin is no error.
func Unpin(ctx context.Context, st store.Store, cat Catalog, key string) (bool, error) {
	full, err := chainFull(cat, key)
	if err != nil {
		return false, err
	}
	if _, ok, err := getJSON[Pin](ctx, st, pinKey(full)); err != nil || !ok {
		return false, err
	}
	if err := st.Delete(ctx, pinKey(full)); err != nil {
		return false, fmt.Errorf("unpin %s: %w", full.Key, err)
	}
	return true, nil
}

// chainFull is the full of the chain snapshot key is in.
func chainFull(cat Catalog, key string) (Snapshot, error) {
	for _, s := range cat.all {
		if s.Key != key {
			continue
		}
		if s.Legacy() {
			return Snapshot{}, fmt.Errorf("%s is in the read-only v1 layout: retention never deletes it", key)
		}
		if s.Kind == KindFull {
			return s, nil
		}
		if f, ok := fullOf(cat, s); ok {
			return f, nil
		}
		return Snapshot{}, fmt.Errorf("%s: no full precedes it on its timeline", key)
	}
	return Snapshot{}, fmt.Errorf("%s: %w (etcd-backup list shows the keys)", key, store.ErrNotFound)
}
