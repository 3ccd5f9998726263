package drill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Options configures a drill. The zero value replays the chain under
// os.TempDir().
type Options struct {
	// Read reads the chain: its Codec, Logger and Progress (its Target
	// is the drill's to pick).
	Read restore.ReadOptions
	// WorkDir holds the chain while it is replayed. Default os.TempDir().
	WorkDir string
	// Now stamps the record. Default time.Now.
	Now func() time.Time
}

// Outcome is what a drill found. Record is as written on the store (its
// Key set when it was); Err says why the chain did not restore, or what
// it restored instead.
type Outcome struct {
	Record snapshot.DrillRecord
	Report history.Report
	Err    error
}

// Live restores the latest chain in a scratch directory, without a data
// dir, and compares its keyspace with the live cluster cli reaches at the
// chain's revision (history.LiveDigest): equal digests prove the backup
// exact. When the cluster compacted past that revision only the chain is
// checked (it replayed whole), and the record says it was not compared.
// The record is written beside the backups, where fleets read it and a
// drill far from the cluster (Far) finds the digest to check against; the
// error is that write's alone.
func Live(ctx context.Context, st store.Store, cli *clientv3.Client, o Options) (Outcome, error) {
	start := time.Now()
	out := Outcome{Record: snapshot.DrillRecord{Source: snapshot.DrillBySidecar, Result: snapshot.DrillFailed}}
	rep, err := history.Verify(ctx, st, history.VerifyOptions{Read: o.Read, WorkDir: o.WorkDir})
	out.Report = rep
	rec := &out.Record
	if err == nil {
		var live history.Digest
		live, err = history.LiveDigest(ctx, cli, rep.Digest.Revision)
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			rec.Result, err = snapshot.DrillOK, nil
		case err == nil && live != rep.Digest:
			rec.Result, err = snapshot.DrillMismatch, fmt.Errorf("the backup has %s; the cluster has %s", rep.Digest, live)
		case err == nil:
			rec.Result, rec.Compared = snapshot.DrillOK, true
		}
	}
	out.Err = err
	rec.Full, rec.Revision, rec.Keys, rec.SHA256 = rep.Chain.Full.Key, rep.Digest.Revision, rep.Digest.Keys, rep.Digest.SHA256
	return write(ctx, st, out, o, start)
}

// Far restores one prefix's backups (st is the prefix's store) in a
// scratch directory, far from their cluster, and checks the keyspace
// against the newest digest a Live drill recorded equal to its cluster:
// the chain replayed to that revision must give that digest. Without such
// a record, or when its revision is no longer in the backups, the latest
// chain must replay whole (the record says it was not compared). The
// record is written beside the backups either way; the error is that
// write's alone.
func Far(ctx context.Context, st store.Store, o Options) (Outcome, error) {
	start := time.Now()
	out := Outcome{Record: snapshot.DrillRecord{Source: snapshot.DrillByFleet, Result: snapshot.DrillFailed}}
	rec := &out.Record
	_, verified, _, hasVerified, err := snapshot.Drills(ctx, st)
	if err != nil {
		return out, fmt.Errorf("drill: %w", err)
	}
	src := o.Read
	var note string
	if hasVerified {
		// Backups that end before what a sidecar verified lost their
		// newest objects: no replay of what is left can make up for it.
		latest, err := restore.Chain(ctx, st, restore.Target{})
		if err == nil && latest.LastRevision() < verified.Revision {
			out.Err = fmt.Errorf("the backups end at revision %d, before the %d the sidecar verified (%s): backups were lost",
				latest.LastRevision(), verified.Revision, verified.Key)
			rec.Full = latest.Full.Key
			return write(ctx, st, out, o, start)
		}
		if _, err := restore.Chain(ctx, st, restore.Target{Revision: verified.Revision}); err != nil {
			note = fmt.Sprintf("the digest recorded at revision %d (%s) is no longer in the backups: %v", verified.Revision, verified.Key, err)
			hasVerified = false
		} else {
			src.Target = restore.Target{Revision: verified.Revision}
		}
	}
	rep, err := history.Verify(ctx, st, history.VerifyOptions{Read: src, WorkDir: o.WorkDir})
	out.Report = rep
	rec.Full, rec.Revision, rec.Keys, rec.SHA256 = rep.Chain.Full.Key, rep.Digest.Revision, rep.Digest.Keys, rep.Digest.SHA256
	switch {
	case err != nil:
		out.Err = err
	case hasVerified && (rep.Digest.Revision != verified.Revision || rep.Digest.Keys != verified.Keys || rep.Digest.SHA256 != verified.SHA256):
		rec.Result, rec.Compared = snapshot.DrillMismatch, true
		out.Err = fmt.Errorf("the backup restores %s; the sidecar recorded %d keys at revision %d, sha256 %s (%s)",
			rep.Digest, verified.Keys, verified.Revision, verified.SHA256, verified.Key)
	default:
		rec.Result, rec.Compared, rec.Error = snapshot.DrillOK, hasVerified, note
	}
	return write(ctx, st, out, o, start)
}

// write records the drill's outcome beside the backups.
func write(ctx context.Context, st store.Store, out Outcome, o Options, start time.Time) (Outcome, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	rec := &out.Record
	rec.At, rec.TookSeconds = now(), time.Since(start).Seconds()
	if out.Err != nil {
		rec.Error = out.Err.Error()
	}
	key, err := snapshot.WriteDrill(ctx, st, *rec)
	if err != nil {
		return out, fmt.Errorf("drill: record the result (%s): %w", rec.Result, err)
	}
	rec.Key = key
	return out, nil
}
