package etcdtest

import (
	"context"
	"fmt"
	"math/rand/v2"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Workload is a seeded mix of writes. The zero value writes 1000 puts over
// 100 keys under "/workload/" with values of up to 256 bytes.
type Workload struct {
	// Ops is the number of write requests; 0 means 1000.
	Ops int
	// Keys is the number of distinct keys written; 0 means 100.
	Keys int
	// Prefix is put before every key; "" means "/workload/".
	Prefix string
	// ValueSize is the largest value in bytes; 0 means 256.
	ValueSize int
	// DeletePercent of the requests delete a key (0..100).
	DeletePercent int
	// TxnPercent of the requests are transactions that put several keys and
	// delete one, all at one revision (0..100).
	TxnPercent int
	// LeasePercent of the puts attach a long-lived lease (0..100).
	LeasePercent int
	// Seed makes the sequence repeatable.
	Seed uint64
}

// Result is what a workload left behind.
type Result struct {
	// Expected is the value of every key of the workload that exists at the
	// end; deleted keys are absent.
	Expected map[string]string
	// FirstRevision and LastRevision bound the revisions the workload wrote.
	FirstRevision, LastRevision int64
	// Lease is the lease attached to some puts, 0 when none was granted.
	Lease clientv3.LeaseID
}

func (w Workload) withDefaults() Workload {
	if w.Ops <= 0 {
		w.Ops = 1000
	}
	if w.Keys <= 0 {
		w.Keys = 100
	}
	if w.Prefix == "" {
		w.Prefix = "/workload/"
	}
	if w.ValueSize <= 0 {
		w.ValueSize = 256
	}
	return w
}

// Run writes the workload through cli, one request at a time, and returns
// the state it expects the keyspace under the prefix to be in.
func (w Workload) Run(ctx context.Context, cli *clientv3.Client) (Result, error) {
	w = w.withDefaults()
	rng := rand.New(rand.NewPCG(w.Seed, w.Seed^0x9e3779b97f4a7c15))
	res := Result{Expected: map[string]string{}}

	if w.LeasePercent > 0 {
		lease, err := cli.Grant(ctx, 24*3600)
		if err != nil {
			return res, fmt.Errorf("workload: grant lease: %w", err)
		}
		res.Lease = lease.ID
	}
	key := func() string { return fmt.Sprintf("%skey-%06d", w.Prefix, rng.IntN(w.Keys)) }
	value := func(op int) string {
		n := 1 + rng.IntN(w.ValueSize)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		v := fmt.Sprintf("op%d-", op) + string(b)
		return v[:min(len(v), w.ValueSize)]
	}
	putOpts := func() []clientv3.OpOption {
		if res.Lease != 0 && rng.IntN(100) < w.LeasePercent {
			return []clientv3.OpOption{clientv3.WithLease(res.Lease)}
		}
		return nil
	}

	for op := 0; op < w.Ops; op++ {
		var rev int64
		switch r := rng.IntN(100); {
		case r < w.DeletePercent:
			k := key()
			resp, err := cli.Delete(ctx, k)
			if err != nil {
				return res, fmt.Errorf("workload: op %d delete %s: %w", op, k, err)
			}
			delete(res.Expected, k)
			rev = resp.Header.Revision
		case r < w.DeletePercent+w.TxnPercent:
			ops, puts, del := w.txnOps(key, value, putOpts, op)
			resp, err := cli.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				return res, fmt.Errorf("workload: op %d txn: %w", op, err)
			}
			for k, v := range puts {
				res.Expected[k] = v
			}
			if del != "" {
				delete(res.Expected, del)
			}
			rev = resp.Header.Revision
		default:
			k, v := key(), value(op)
			resp, err := cli.Put(ctx, k, v, putOpts()...)
			if err != nil {
				return res, fmt.Errorf("workload: op %d put %s: %w", op, k, err)
			}
			res.Expected[k] = v
			rev = resp.Header.Revision
		}
		if res.FirstRevision == 0 {
			res.FirstRevision = rev
		}
		res.LastRevision = rev
	}
	return res, nil
}

// txnOps builds a transaction of up to three puts and one delete of a key
// that none of the puts touch (etcd refuses a txn that writes a key twice).
func (w Workload) txnOps(key func() string, value func(int) string, putOpts func() []clientv3.OpOption, op int) ([]clientv3.Op, map[string]string, string) {
	puts := map[string]string{}
	var ops []clientv3.Op
	for i := 0; i < 3; i++ {
		k := key()
		if _, dup := puts[k]; dup {
			continue
		}
		v := value(op)
		puts[k] = v
		ops = append(ops, clientv3.OpPut(k, v, putOpts()...))
	}
	del := key()
	if _, dup := puts[del]; dup {
		return ops, puts, ""
	}
	return append(ops, clientv3.OpDelete(del)), puts, del
}

// ReadAll returns every key under prefix with its value, read at rev
// (0 means the latest), and the revision the read was served at. Extra
// options go to the Get (clientv3.WithSerializable for a learner).
func ReadAll(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, extra ...clientv3.OpOption) (map[string]string, int64, error) {
	opts := append([]clientv3.OpOption{clientv3.WithPrefix()}, extra...)
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := cli.Get(ctx, prefix, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s at revision %d: %w", prefix, rev, err)
	}
	kv := make(map[string]string, len(resp.Kvs))
	for _, e := range resp.Kvs {
		kv[string(e.Key)] = string(e.Value)
	}
	return kv, resp.Header.Revision, nil
}
