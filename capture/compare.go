package capture

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
)

// evidence is what comparing the cluster's keys with a chain's says of
// their pasts: nothing, the same, or different.
type evidence int

const (
	evidenceNone evidence = iota
	evidenceSame
	evidenceDiffers
)

// atRevKeys is how many of a tail's newest keys are asked at its
// revision: there the newest show a different past.
const atRevKeys = 32

// compareLive asks the cluster for the keys of tail (newest first) as
// revision rev left them. One key that differs is a different past; one
// that agrees, with none that differs, the same past. When rev is
// compacted, keys are read as they are now, which tells only for keys not
// written since, and every key of tail is asked: the older keys of a busy
// cluster are the likeliest not to be. proven is how far an agreement
// proves the past: rev when the keys were read at it; read as they are
// now, the newest revision of a key that agreed, since a cluster restored
// to any revision after it holds that key the same.
func compareLive(ctx context.Context, cli *clientv3.Client, tail []snapshot.KeyVersion, rev int64) (e evidence, why string, proven int64, err error) {
	atRev := true
	agree := 0
	for i, want := range tail {
		if atRev && i == atRevKeys {
			break
		}
		var opts []clientv3.OpOption
		if atRev {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, string(want.Key), opts...)
		if atRev && errors.Is(err, rpctypes.ErrCompacted) {
			atRev = false
			if resp, err = cli.Get(ctx, string(want.Key)); err != nil {
				return evidenceNone, "", 0, fmt.Errorf("compare with the cluster: %w", err)
			}
		}
		if err != nil {
			return evidenceNone, "", 0, fmt.Errorf("compare with the cluster: %w", err)
		}
		var got *mvccpb.KeyValue
		if len(resp.Kvs) > 0 {
			got = resp.Kvs[0]
		}
		e, why := judge(want, got, rev, atRev)
		if e == evidenceNone && atRev && want.Deleted && got == nil {
			if e, why, err = deletedAt(ctx, cli, want); err != nil {
				return evidenceNone, "", 0, fmt.Errorf("compare with the cluster: %w", err)
			}
		}
		switch e {
		case evidenceDiffers:
			return evidenceDiffers, why, 0, nil
		case evidenceSame:
			agree++
			proven = max(proven, want.Mod)
		}
	}
	switch {
	case agree > 0 && atRev:
		return evidenceSame, "", rev, nil
	case agree > 0:
		return evidenceSame, "", proven, nil
	case len(tail) == 0:
		return evidenceNone, "the chain's end holds no key to compare", 0, nil
	}
	if atRev {
		return evidenceNone, fmt.Sprintf("the keys at revision %d were all deleted, at revisions compacted on the cluster", rev), 0, nil
	}
	return evidenceNone, fmt.Sprintf("revision %d is compacted on the cluster and every key compared was written since", rev), 0, nil
}

// deletedAt tells whether the cluster's revision want.Mod deleted the key,
// as the chain's did: a chain whose newest delta holds only deletes (a
// Kubernetes cluster's expired events) would otherwise show nothing of
// its end. The key exists just before that revision and not at it, or the
// pasts differ (etcd reports a delete only of a key that exists);
// compacted, there is no word.
func deletedAt(ctx context.Context, cli *clientv3.Client, want snapshot.KeyVersion) (evidence, string, error) {
	if want.Mod <= 1 {
		return evidenceNone, "", nil
	}
	exists := func(rev int64) (bool, error) {
		resp, err := cli.Get(ctx, string(want.Key), clientv3.WithRev(rev), clientv3.WithCountOnly())
		if err != nil {
			return false, err
		}
		return resp.Count > 0, nil
	}
	before, err := exists(want.Mod - 1)
	if err == nil && before {
		var at bool
		if at, err = exists(want.Mod); err == nil && !at {
			return evidenceSame, "", nil
		}
	}
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return evidenceNone, "", nil
	case err != nil:
		return evidenceNone, "", err
	case !before:
		return evidenceDiffers, fmt.Sprintf("key %q was deleted at revision %d, the cluster had none at %d", want.Key, want.Mod, want.Mod-1), nil
	}
	return evidenceDiffers, fmt.Sprintf("key %q was deleted at revision %d, the cluster's was deleted later", want.Key, want.Mod), nil
}

// judge compares one key: got is the cluster's, at rev when atRev, else
// as it is now.
func judge(want snapshot.KeyVersion, got *mvccpb.KeyValue, rev int64, atRev bool) (evidence, string) {
	key := fmt.Sprintf("%q", want.Key)
	equal := func() bool {
		// A datastore that keeps no versions (kine) answers 0; its
		// backups record 1.
		return got.ModRevision == want.Mod && got.CreateRevision == want.Create && max(got.Version, 1) == want.Version &&
			crc32.Checksum(got.Value, castagnoli) == want.Value
	}
	switch {
	case atRev && want.Deleted && got == nil:
		// Every past in which the key does not exist agrees: no word.
		return evidenceNone, ""
	case atRev && !want.Deleted && got != nil && equal():
		return evidenceSame, ""
	case atRev && want.Deleted:
		return evidenceDiffers, fmt.Sprintf("key %s was deleted at revision %d, the cluster has it from revision %d", key, want.Mod, got.ModRevision)
	case atRev && got == nil:
		return evidenceDiffers, fmt.Sprintf("key %s was written at revision %d, the cluster has none at %d", key, want.Mod, rev)
	case atRev:
		return evidenceDiffers, fmt.Sprintf("key %s was written at revision %d, the cluster's is of revision %d with other contents", key, want.Mod, got.ModRevision)
	case got == nil:
		return evidenceNone, ""
	case want.Deleted && got.CreateRevision <= rev:
		return evidenceDiffers, fmt.Sprintf("key %s was deleted at revision %d, the cluster's was created at %d and lives on", key, want.Mod, got.CreateRevision)
	case want.Deleted || got.ModRevision > rev:
		return evidenceNone, ""
	case equal():
		return evidenceSame, ""
	}
	return evidenceDiffers, fmt.Sprintf("key %s was written at revision %d, the cluster's last write of it is of revision %d", key, want.Mod, got.ModRevision)
}
