package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// Protection is whether a store keeps what it holds against deletes: a
// write-once lock (S3 Object Lock, a GCS retention policy, Azure
// immutability) refused the delete of a probe object.
type Protection struct {
	// DeletesRefused: the store refused to delete the probe (ErrLocked).
	DeletesRefused bool
	// Probe is the object asked.
	Probe string
}

// ProbeProtection asks st whether it refuses deletes. It tries to delete
// the newest probe an earlier ask left; with none, or once that one is
// gone (its lock ended, or nothing locks), it writes a new probe and tries
// to delete that. A refused delete leaves the probe, a few bytes under
// etcdkit/lock-probe/, until its lock ends: so a locked store holds about
// one probe per retention period, and an unlocked one none.
func ProbeProtection(ctx context.Context, st store.Store) (Protection, error) {
	objs, err := st.List(ctx, probeDir+"/")
	if err != nil {
		return Protection{}, fmt.Errorf("lock probe: %w", err)
	}
	// Names begin with unix seconds: the newest sorts last.
	slices.SortFunc(objs, func(a, b store.Object) int { return strings.Compare(b.Key, a.Key) })
	for _, o := range objs {
		p, err := deleteProbe(ctx, st, o.Key)
		if err != nil || p.DeletesRefused {
			return p, err
		}
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	key := fmt.Sprintf("%s/%d-%s", probeDir, time.Now().Unix(), hex.EncodeToString(suffix))
	if err := st.Put(ctx, key, strings.NewReader("etcdkit asks with this object whether the store refuses deletes\n")); err != nil {
		return Protection{}, fmt.Errorf("lock probe: %w", err)
	}
	return deleteProbe(ctx, st, key)
}

func deleteProbe(ctx context.Context, st store.Store, key string) (Protection, error) {
	switch err := st.Delete(ctx, key); {
	case errors.Is(err, store.ErrLocked):
		return Protection{DeletesRefused: true, Probe: key}, nil
	case err != nil:
		return Protection{Probe: key}, fmt.Errorf("lock probe: %w", err)
	}
	return Protection{Probe: key}, nil
}
