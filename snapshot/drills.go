package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// Where a drill ran: a sidecar beside its member compares the restored
// chain with the live cluster; a fleet drill, far from the cluster,
// compares it with the digest a sidecar's drill recorded.
const (
	DrillBySidecar DrillSource = "sidecar"
	DrillByFleet   DrillSource = "fleet"
)

// DrillSource says where a drill ran.
type DrillSource string

// DrillResult is what a drill found.
type DrillResult string

// The results of a drill: the chain restored what it was compared with
// (or, with nothing to compare, restored whole); it restored something
// else; it did not restore.
const (
	DrillOK       DrillResult = "ok"
	DrillMismatch DrillResult = "mismatch"
	DrillFailed   DrillResult = "failed"
)

// DrillRecord is what a restore drill found, kept on the store beside the
// backups so that whoever looks at many clusters' backups (etcd-backup
// fleet) knows which of them restore.
type DrillRecord struct {
	At     time.Time   `json:"at"`
	Source DrillSource `json:"source"`
	Result DrillResult `json:"result"`
	// Full is the chain's full snapshot; Revision, Keys and SHA256 the
	// digest of the keyspace the chain restored (history.Digest).
	Full     string `json:"full,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	Keys     int64  `json:"keys,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	// Compared says the digest was compared: with the live cluster (a
	// sidecar's; false when it had compacted past the revision) or with
	// a recorded one (a fleet drill's; false when none was recorded).
	Compared    bool    `json:"compared"`
	Error       string  `json:"error,omitempty"`
	TookSeconds float64 `json:"took_seconds"`
	// Key is the record's object.
	Key string `json:"-"`
}

// WriteDrill records r under a name of its own, create-only.
func WriteDrill(ctx context.Context, st store.Store, r DrillRecord) (string, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s/%s-%s-%s.json", drillDir, r.At.UTC().Format("20060102T150405.000000000Z"), r.Source, hex.EncodeToString(b[:]))
	return key, putJSON(ctx, st, key, r)
}

// IsDrillKey says whether key names a drill record.
func IsDrillKey(key string) bool {
	return path.Dir(key) == drillDir && strings.HasSuffix(key, ".json")
}

// DrillKeys are the keys of the drill records among objs, the oldest
// first.
func DrillKeys(objs []store.Object) []string {
	var keys []string
	for _, o := range objs {
		if IsDrillKey(o.Key) {
			keys = append(keys, o.Key)
		}
	}
	slices.Sort(keys)
	return keys
}

// Drills reads the newest drill record (ok false when there is none) and
// the newest one of a sidecar that compared its digest with the live
// cluster and found it equal: the digest a fleet drill checks.
func Drills(ctx context.Context, st store.Store) (last, verified DrillRecord, ok, hasVerified bool, err error) {
	objs, err := st.List(ctx, drillDir+"/")
	if err != nil {
		return last, verified, false, false, fmt.Errorf("list drill records: %w", err)
	}
	keys := DrillKeys(objs)
	for i := len(keys) - 1; i >= 0; i-- {
		r, found, err := ReadDrill(ctx, st, keys[i])
		if err != nil {
			return last, verified, ok, hasVerified, err
		}
		if !found {
			continue
		}
		if !ok {
			last, ok = r, true
		}
		if r.Source == DrillBySidecar && r.Result == DrillOK && r.Compared {
			return last, r, ok, true, nil
		}
	}
	return last, verified, ok, hasVerified, nil
}

// ReadDrill reads the drill record at key; ok is false when it is gone.
func ReadDrill(ctx context.Context, st store.Store, key string) (DrillRecord, bool, error) {
	r, ok, err := getJSON[DrillRecord](ctx, st, key)
	if err != nil {
		return r, false, fmt.Errorf("drill record %s: %w", key, err)
	}
	r.Key = key
	return r, ok, nil
}

// keepDrills is how many drill records retention keeps, the newest, beside
// the newest one a sidecar verified against its cluster: a month of daily
// drills, and a fleet's listing stays bounded whatever the drill period.
const keepDrills = 32

// pruneDrills deletes the drill records past the newest keepDrills, but the
// newest a sidecar verified (the digest a fleet drill checks). A record a
// lock keeps, or one that does not read, stays.
func pruneDrills(ctx context.Context, st store.Store) (deleted int, err error) {
	objs, err := st.List(ctx, drillDir+"/")
	if err != nil {
		return 0, fmt.Errorf("list drill records: %w", err)
	}
	keys := DrillKeys(objs)
	if len(keys) <= keepDrills {
		return 0, nil
	}
	verified := ""
	for i := len(keys) - 1; i >= 0 && verified == ""; i-- {
		if !strings.Contains(path.Base(keys[i]), "-"+string(DrillBySidecar)+"-") {
			continue
		}
		r, ok, err := ReadDrill(ctx, st, keys[i])
		if err != nil {
			return 0, err
		}
		if ok && r.Result == DrillOK && r.Compared {
			verified = keys[i]
		}
	}
	for _, k := range keys[:len(keys)-keepDrills] {
		if k == verified {
			continue
		}
		if err := st.Delete(ctx, k); err != nil && !errors.Is(err, store.ErrLocked) && !errors.Is(err, store.ErrNotFound) {
			return deleted, fmt.Errorf("delete drill record %s: %w", k, err)
		}
		deleted++
	}
	return deleted, nil
}
