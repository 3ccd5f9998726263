package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// DrillOptions configures Drill. The zero value checks the newest digest a
// sidecar recorded, replaying under os.TempDir().
type DrillOptions struct {
	// Source reads the chain: its Codec, Logger and Progress (its Target
	// is Drill's to pick).
	restore.Source
	// WorkDir holds the chain while it is replayed. Default os.TempDir().
	WorkDir string
	// Now stamps the record. Default time.Now.
	Now func() time.Time
}

// Drill restores one prefix's backups (st is the prefix's store) in a
// scratch directory, far from their cluster, and checks the keyspace
// against the newest digest a sidecar's drill recorded equal to its live
// cluster: the chain replayed to that revision must give that digest.
// Without such a record, or when its revision is no longer in the
// backups, the latest chain must replay whole (the record says it was
// not compared). The record is written beside the backups either way.
func Drill(ctx context.Context, st store.Store, opts DrillOptions) (snapshot.DrillRecord, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	start := time.Now()
	rec := snapshot.DrillRecord{Source: snapshot.DrillByFleet, Result: snapshot.DrillFailed}
	_, verified, _, hasVerified, err := snapshot.Drills(ctx, st)
	if err != nil {
		return rec, fmt.Errorf("fleet drill: %w", err)
	}
	src := opts.Source
	var note string
	if hasVerified {
		// Backups that end before what a sidecar verified lost their
		// newest objects: no replay of what is left can make up for it.
		latest, err := restore.Chain(ctx, st, restore.Target{})
		if err == nil && latest.LastRevision() < verified.Revision {
			rec.Error = fmt.Sprintf("the backups end at revision %d, before the %d the sidecar verified (%s): backups were lost",
				latest.LastRevision(), verified.Revision, verified.Key)
			rec.Full, rec.At, rec.TookSeconds = latest.Full.Key, opts.Now(), time.Since(start).Seconds()
			return writeDrill(ctx, st, rec)
		}
	}
	if hasVerified {
		if _, err := restore.Chain(ctx, st, restore.Target{Revision: verified.Revision}); err != nil {
			note = fmt.Sprintf("the digest recorded at revision %d (%s) is no longer in the backups: %v", verified.Revision, verified.Key, err)
			hasVerified = false
		} else {
			src.Target = restore.Target{Revision: verified.Revision}
		}
	}
	rep, err := restore.Verify(ctx, st, restore.VerifyOptions{Source: src, WorkDir: opts.WorkDir})
	rec.Full, rec.Revision, rec.Keys, rec.SHA256 = rep.Chain.Full.Key, rep.Digest.Revision, rep.Digest.Keys, rep.Digest.SHA256
	switch {
	case err != nil:
		rec.Error = err.Error()
	case hasVerified && (rep.Digest.Revision != verified.Revision || rep.Digest.Keys != verified.Keys || rep.Digest.SHA256 != verified.SHA256):
		rec.Result, rec.Compared = snapshot.DrillMismatch, true
		rec.Error = fmt.Sprintf("the backup restores %s; the sidecar recorded %d keys at revision %d, sha256 %s (%s)",
			rep.Digest, verified.Keys, verified.Revision, verified.SHA256, verified.Key)
	default:
		rec.Result, rec.Compared, rec.Error = snapshot.DrillOK, hasVerified, note
	}
	rec.At, rec.TookSeconds = opts.Now(), time.Since(start).Seconds()
	return writeDrill(ctx, st, rec)
}

// writeDrill records a fleet drill's result beside the backups.
func writeDrill(ctx context.Context, st store.Store, rec snapshot.DrillRecord) (snapshot.DrillRecord, error) {
	key, err := snapshot.WriteDrill(ctx, st, rec)
	rec.Key = key
	if err != nil {
		return rec, fmt.Errorf("fleet drill: record the result (%s): %w", rec.Result, err)
	}
	return rec, nil
}

// Sample picks n of prefixes for the day: every caller on the same day
// (each drill of one CronJob run, by its index) picks the same n, in the
// same order, and another day other ones.
func Sample(prefixes []string, n int, day time.Time) []string {
	out := slices.Clone(prefixes)
	slices.Sort(out)
	sum := sha256.Sum256([]byte(day.UTC().Format(time.DateOnly)))
	r := rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:min(n, len(out))]
}
