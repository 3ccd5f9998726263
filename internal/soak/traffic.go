package soak

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// traffic writes like a Kubernetes API server: objects created, updated
// with a compare on their mod revision, deleted; namespaces deleted by
// range; events on leases that expire; locks on leases that are revoked;
// linearizable reads; compactions of old revisions. Every acknowledged
// write goes to the record.
type traffic struct {
	o       Options
	cli     *clientv3.Client
	rec     *record
	writes  atomic.Int64 // acknowledged writes
	failed  atomic.Int64 // writes the cluster did not acknowledge
	reads   atomic.Int64
	compact atomic.Int64 // compactions done
	wg      sync.WaitGroup
}

const (
	objects    = 4000 // keys of objects
	namespaces = 40
)

func objectKey(r *rand.Rand) string {
	i := r.IntN(objects)
	return fmt.Sprintf("/registry/pods/ns-%02d/pod-%04d", i%namespaces, i)
}

// value makes an object's bytes: mostly a few hundred bytes to a few KB,
// sometimes tens of KB, rarely about a MiB (a big ConfigMap).
func value(r *rand.Rand, bytes *rand.ChaCha8, tag string) []byte {
	n := 200 + r.IntN(1800)
	switch p := r.IntN(10000); {
	case p < 2:
		n = 900<<10 + r.IntN(100<<10)
	case p < 100:
		n = 2<<10 + r.IntN(60<<10)
	}
	b := make([]byte, n)
	_, _ = bytes.Read(b)
	copy(b, tag)
	return b
}

func (t *traffic) start(ctx context.Context, seed uint64) {
	for w := range t.o.Writers {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			var key [32]byte
			binary.LittleEndian.PutUint64(key[:], seed)
			binary.LittleEndian.PutUint64(key[8:], uint64(w))
			src := rand.NewChaCha8(key)
			t.writer(ctx, rand.New(src), src, w)
		}()
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.compactor(ctx)
	}()
}

func (t *traffic) wait() { t.wg.Wait() }

func (t *traffic) writer(ctx context.Context, r *rand.Rand, src *rand.ChaCha8, w int) {
	for i := 0; ctx.Err() == nil; i++ {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		switch p := r.IntN(100); {
		case p < 45:
			err = t.put(octx, objectKey(r), value(r, src, fmt.Sprintf("w%d-%d ", w, i)), 0)
		case p < 65:
			err = t.update(octx, objectKey(r), value(r, src, fmt.Sprintf("w%d-%d ", w, i)))
		case p < 73:
			err = t.delete(octx, objectKey(r))
		case p < 74:
			err = t.deleteNamespace(octx, r.IntN(namespaces))
		case p < 90:
			err = t.event(octx, r, src, fmt.Sprintf("/registry/events/ns-%02d/ev-%d-%d", r.IntN(namespaces), w, i))
		case p < 93:
			err = t.lock(octx, fmt.Sprintf("/locks/lock-%d", r.IntN(8)), w)
		default:
			err = t.read(octx, objectKey(r))
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			t.failed.Add(1)
			// A cluster without a leader answers at once: do not spin.
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

func (t *traffic) put(ctx context.Context, key string, v []byte, lease clientv3.LeaseID) error {
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(lease))
	}
	resp, err := t.cli.Put(ctx, key, string(v), opts...)
	if err != nil {
		return err
	}
	t.ok(ack{at: time.Now(), rev: resp.Header.Revision, key: key, value: hashValue(v)})
	return nil
}

func (t *traffic) ok(a ack) {
	t.writes.Add(1)
	t.rec.acked(a)
}

// update is Kubernetes' GuaranteedUpdate: read, then write if nobody wrote
// in between (a create when the key is absent).
func (t *traffic) update(ctx context.Context, key string, v []byte) error {
	get, err := t.cli.Get(ctx, key)
	if err != nil {
		return err
	}
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if len(get.Kvs) == 1 {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", get.Kvs[0].ModRevision)
	}
	resp, err := t.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, string(v))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return err
	}
	if resp.Succeeded {
		t.ok(ack{at: time.Now(), rev: resp.Header.Revision, key: key, value: hashValue(v)})
	}
	return nil
}

func (t *traffic) delete(ctx context.Context, key string) error {
	resp, err := t.cli.Delete(ctx, key)
	if err != nil {
		return err
	}
	if resp.Deleted > 0 {
		t.ok(ack{at: time.Now(), rev: resp.Header.Revision, key: key, del: true})
	}
	return nil
}

func (t *traffic) deleteNamespace(ctx context.Context, ns int) error {
	resp, err := t.cli.Delete(ctx, fmt.Sprintf("/registry/pods/ns-%02d/", ns), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	if resp.Deleted > 0 {
		t.writes.Add(1)
	}
	return nil
}

// event is a Kubernetes event: a key on a lease of a few seconds, which
// expires with its keys.
func (t *traffic) event(ctx context.Context, r *rand.Rand, src *rand.ChaCha8, key string) error {
	ttl := int64(3 + r.IntN(8))
	l, err := t.cli.Grant(ctx, ttl)
	if err != nil {
		return err
	}
	t.rec.granted(int64(l.ID), ttl)
	return t.put(ctx, key, value(r, src, "event "), l.ID)
}

// lock takes a lock as a controller does (create if absent, on a lease),
// and lets it go by revoking the lease.
func (t *traffic) lock(ctx context.Context, key string, w int) error {
	l, err := t.cli.Grant(ctx, 5)
	if err != nil {
		return err
	}
	t.rec.granted(int64(l.ID), 5)
	v := fmt.Sprintf("holder w%d", w)
	resp, err := t.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, v, clientv3.WithLease(l.ID))).Commit()
	if err != nil {
		return err
	}
	if resp.Succeeded {
		t.ok(ack{at: time.Now(), rev: resp.Header.Revision, key: key, value: hashValue([]byte(v))})
	}
	_, err = t.cli.Revoke(ctx, l.ID)
	return err
}

func (t *traffic) read(ctx context.Context, key string) error {
	resp, err := t.cli.Get(ctx, key)
	if err != nil {
		return err
	}
	rd := read{rev: resp.Header.Revision, key: key}
	if len(resp.Kvs) == 1 {
		kv := resp.Kvs[0]
		rd.present = true
		rd.state = keyState{value: hashValue(kv.Value), create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version, ls: kv.Lease}
	}
	t.reads.Add(1)
	t.rec.mu.Lock()
	t.rec.reads = append(t.rec.reads, rd)
	t.rec.mu.Unlock()
	return nil
}

// compactor compacts etcd as the Kubernetes API server does, to the
// revision of a while ago, and never past what the record's watch has
// seen.
func (t *traffic) compactor(ctx context.Context) {
	tick := time.NewTicker(t.o.CompactEvery)
	defer tick.Stop()
	var last, prev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		at := min(prev, t.rec.progressRev())
		prev = t.rec.progressRev()
		if at <= last {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := t.cli.Compact(cctx, at)
		cancel()
		if err == nil {
			last = at
			t.compact.Add(1)
		}
	}
}
