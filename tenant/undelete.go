package tenant

import (
	"bytes"
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/history"
)

// UndeleteOptions configures Undelete. The zero value is a dry run.
type UndeleteOptions struct {
	// Apply writes; without it Undelete only reports what it would write.
	Apply bool
}

// Undeleted is what Undelete did, or would do, with each key of the past
// state; each list is in key order.
type Undeleted struct {
	// Written: absent from the live cluster, and written back (or, in a
	// dry run, to be written).
	Written []string
	// Same: the live key holds the past value already.
	Same []string
	// Changed: the live key holds another value, or was created between
	// the check and the write; it is left as it is.
	Changed []string
	// WithoutLease: written keys that had a lease in the past; they are
	// written without one, since that lease has long expired or been
	// revoked.
	WithoutLease []string
}

// Undelete writes the keys of a past state back into the live cluster
// where they are absent, each in a transaction guarded on the key still
// being absent, so nothing written meanwhile is ever overwritten. A key
// that exists with another value is reported, not touched.
func Undelete(ctx context.Context, cli *clientv3.Client, past history.State, opts UndeleteOptions) (Undeleted, error) {
	var u Undeleted
	for _, kv := range past.KVs {
		key := string(kv.Key)
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return u, fmt.Errorf("undelete %q: %w", key, err)
		}
		if len(resp.Kvs) > 0 {
			if bytes.Equal(resp.Kvs[0].Value, kv.Value) {
				u.Same = append(u.Same, key)
			} else {
				u.Changed = append(u.Changed, key)
			}
			continue
		}
		if opts.Apply {
			txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, string(kv.Value))).Commit()
			if err != nil {
				return u, fmt.Errorf("undelete %q: %w", key, err)
			}
			if !txn.Succeeded {
				u.Changed = append(u.Changed, key)
				continue
			}
		}
		u.Written = append(u.Written, key)
		if kv.Lease != 0 {
			u.WithoutLease = append(u.WithoutLease, key)
		}
	}
	return u, nil
}
