package capture

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Full streams a snapshot of the member the client talks to (etcd's
// Maintenance.Snapshot) into st, named with the revision its database
// holds (snapshot.WriteFull), with the cluster's identity beside it.
func Full(ctx context.Context, cli *clientv3.Client, st store.Store, opts snapshot.FullOptions) (snapshot.Snapshot, error) {
	return FullOf(ctx, EtcdDatastore(cli), st, opts)
}

// FullOf writes a full snapshot of ds into st, as Full does for an etcd
// cluster; a logical full (SourceEtcdAPI) is named and checked the same
// way, and its identity record says what it holds.
func FullOf(ctx context.Context, ds Datastore, st store.Store, opts snapshot.FullOptions) (snapshot.Snapshot, error) {
	// Asked first: the identity is of the cluster the stream comes from.
	id, idErr := ds.Identity(ctx)
	// Closing the client's reader does not end etcd's stream: only its
	// context does. A stream left open holds a read transaction on the
	// member, and the member's next defragmentation waits for it with its
	// writes stopped — a full spool would stop the member for as long as
	// this process lives.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := ds.Full(ctx)
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	defer func() { _ = rc.Close() }()
	if l, ok := rc.(*logicalStream); ok {
		id.Logical = &l.info
	}
	var idp *snapshot.Identity
	if idErr == nil {
		idp = &id
	} else {
		logger(opts.Logger).Warn("the cluster's identity could not be read; the full is written without it", "error", idErr)
	}
	snap, err := snapshot.WriteFull(ctx, st, rc, idp, opts)
	if err != nil && ds.Kind() == snapshot.SourceEtcd && unsupported(err) {
		return snap, fmt.Errorf("etcd snapshot: the endpoints serve etcd's API without its snapshot RPC (kine?): back them up with --source etcd-api (SourceEtcdAPI): %w", err)
	}
	if err != nil {
		return snap, fmt.Errorf("%s snapshot: %w", ds.Kind(), err)
	}
	return snap, nil
}
