package chaintest

import (
	"context"
	"io"
	"strings"
	"sync/atomic"

	"github.com/etcdkit/etcdkit/store"
)

// HeldFulls holds the upload of the first full snapshot after Armed is
// set until a value is sent on Release, and sends its key on Entered once
// held: a full that takes as long as a test needs (etcd-druid#1259's took
// twelve minutes).
type HeldFulls struct {
	store.Store
	Armed   atomic.Bool
	Entered chan string
	Release chan struct{}
}

// NewHeldFulls wraps st, disarmed.
func NewHeldFulls(st store.Store) *HeldFulls {
	return &HeldFulls{Store: st, Entered: make(chan string), Release: make(chan struct{})}
}

func (h *HeldFulls) Put(ctx context.Context, key string, r io.Reader) error {
	if strings.HasPrefix(key, "v2/Full-") && h.Armed.CompareAndSwap(true, false) {
		h.Entered <- key
		select {
		case <-h.Release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return h.Store.Put(ctx, key, r)
}
