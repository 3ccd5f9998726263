package snapshot

import (
	"context"
	"io"
	"slices"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// Annotations are what a delta records on its last event beyond the watch:
// the leases revoked by then, and the users and roles when they changed.
// They are applied to a copy as the delta is written, so the capture may
// go on reading the batch's events meanwhile.
type Annotations struct {
	Revoked []int64
	Auth    *Auth
}

// Apply records a on ev.
func (a Annotations) Apply(ev *Event) {
	if len(a.Revoked) > 0 {
		ev.RevokedLeases = append(slices.Clip(ev.RevokedLeases), a.Revoked...)
	}
	if a.Auth != nil {
		ev.Auth = a.Auth
	}
}

// NewDelta names the delta of revisions start to last, written at created
// with codec c.
func NewDelta(start, last int64, created time.Time, c Codec) Snapshot {
	return newSnapshot(KindDelta, start, last, created, c, false)
}

// WriteDelta writes events, whole revisions start to last of snap (named by
// NewDelta with the same codec), with last applied to the final one, and
// returns the object's size. Like every object it is written once: a name
// taken by other bytes is ErrConflict.
func WriteDelta(ctx context.Context, st store.Store, snap Snapshot, c Codec, events []Event, last Annotations) (int64, error) {
	return put(ctx, st, snap.Key, c, lean, func(w io.Writer) error { return writeDelta(w, events, last) })
}
