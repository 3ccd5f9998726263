package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/etcdkit/etcdkit/store"
)

// The records etcdkit keeps beside the snapshots, all of them here, each
// described with its JSON, writer and readers in FORMAT.md. They live
// under etcdkit/, apart from v1/ and v2/: etcd-backup-restore lists only
// keys that contain "v1" or "v2", so it never sees them, and its restore
// of a prefix etcdkit writes to is what it would be without them. Every
// record is written once (create-only), like the snapshots, so a locked
// bucket keeps them as it keeps the backups.
const (
	// timelineDir holds one record per timeline but the first:
	// <unix>-<id>.json.
	timelineDir = "etcdkit/timelines"
	// identityDir holds each chain's cluster, beside its full:
	// Full-<start>-<last>-<unix>.json (older versions wrote
	// cluster-<id>.json, read only).
	identityDir = "etcdkit/identity"
	// restoreDir holds one record per restore of a cluster from these
	// backups: <unix>-<cluster id>-<random>.json.
	restoreDir = "etcdkit/restores"
	// uploaderDir holds one record per Snapshotter run that uploaded to
	// the prefix, numbered in the order they began (%010d.json). The
	// numbers, not clocks, order them: each run takes the next free one
	// with a create-only write, so two runs never share one and hosts'
	// clocks do not matter.
	uploaderDir = "etcdkit/uploaders"
	// drillDir holds the drill records, one object each, named by the time
	// the drill ended: <time>-<source>-<random>.json; the newest is the last
	// name.
	drillDir = "etcdkit/drills"
	// siteKey names a store that others copy; mirrorKey, on the copy, the
	// store it copies.
	siteKey   = "etcdkit/site.json"
	mirrorKey = "etcdkit/mirror-of.json"
	// pinDir holds one record per pinned full, named as its identity
	// record is: Full-<start>-<last>-<unix>.json. Unpinning deletes it.
	pinDir = "etcdkit/pins"
	// deletionDir holds one record per deletion an operator asked
	// (DeleteChains), written before it: <time>-<random>.json.
	deletionDir = "etcdkit/deletions"
	// bundleDir holds the restore bundles (bundle.go), sealed with age:
	// Full-<start>-<last>-<unix>-<digest>.tar.age.
	bundleDir = "etcdkit/bundles"
	// probeDir holds the objects that ask whether a store refuses deletes:
	// <unix>-<random>, a line of text, deleted at once where nothing locks.
	probeDir = "etcdkit/lock-probe"
)

// putJSON writes v once under key; the same bytes there already are no
// error, other bytes ErrConflict.
func putJSON(ctx context.Context, st store.Store, key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = put(ctx, st, key, Codec{}, lean, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(b))
		return err
	})
	return err
}

func getJSON[T any](ctx context.Context, st store.Store, key string) (v T, ok bool, err error) {
	rc, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return v, false, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, false, fmt.Errorf("record %s: %w: %w", key, errBadRecord, err)
	}
	return v, true, nil
}

// errBadRecord: a record's content is not what its writer writes.
var errBadRecord = errors.New("not a record etcdkit writes")
