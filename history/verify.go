package history

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/restore"
	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Digest sums a keyspace at one revision: every key with its value, create
// revision, modification revision and version. Leases are left out: a
// restore drops the leases granted after its full snapshot.
type Digest struct {
	Revision int64  `json:"revision"`
	Keys     int64  `json:"keys"`
	SHA256   string `json:"sha256"`
}

// String is the digest for people.
func (d Digest) String() string {
	return fmt.Sprintf("%d keys at revision %d, sha256 %s", d.Keys, d.Revision, d.SHA256)
}

// digester builds a Digest from keys in ascending order.
type digester struct {
	h    hash.Hash
	keys int64
}

func newDigester() *digester { return &digester{h: sha256.New()} }

func (d *digester) add(kv *mvccpb.KeyValue) {
	var n [8]byte
	for _, b := range [][]byte{kv.Key, kv.Value} {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		d.h.Write(n[:])
		d.h.Write(b)
	}
	for _, v := range []int64{kv.CreateRevision, kv.ModRevision, kv.Version} {
		binary.BigEndian.PutUint64(n[:], uint64(v))
		d.h.Write(n[:])
	}
	d.keys++
}

func (d *digester) digest(rev int64) Digest {
	return Digest{Revision: rev, Keys: d.keys, SHA256: hex.EncodeToString(d.h.Sum(nil))}
}

// page is how many keys one read of a live cluster returns.
const page = 1000

// LiveDigest sums the keyspace of a live cluster at rev, the same way
// Verify sums a backup: equal digests prove the backup exact.
func LiveDigest(ctx context.Context, cli *clientv3.Client, rev int64) (Digest, error) {
	d := newDigester()
	key := []byte{0}
	for {
		resp, err := cli.Get(ctx, string(key), clientv3.WithFromKey(), clientv3.WithRev(rev),
			clientv3.WithLimit(page), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return Digest{}, fmt.Errorf("digest at revision %d: %w", rev, err)
		}
		for _, kv := range resp.Kvs {
			d.add(kv)
		}
		if !resp.More {
			return d.digest(rev), nil
		}
		key = append(resp.Kvs[len(resp.Kvs)-1].Key, 0)
	}
}

// digest sums the replayed database at its head: every key (Keys' zero
// value), in key order.
func digest(ctx context.Context, p *restore.Past) (Digest, error) {
	d := newDigester()
	err := p.Range(ctx, Keys{}.start(), Keys{}.rangeEnd(), p.Revision(), func(kvs []*mvccpb.KeyValue) {
		for _, kv := range kvs {
			d.add(kv)
		}
	})
	if err != nil {
		return Digest{}, fmt.Errorf("digest: %w", err)
	}
	return d.digest(p.Revision()), nil
}

// VerifyOptions configures Verify. The zero value verifies the latest
// chain in a directory under os.TempDir().
type VerifyOptions struct {
	// Read reads the backups; its Target picks the chain and revision.
	Read restore.ReadOptions
	// WorkDir holds the downloaded chain while it is replayed. Default
	// os.TempDir().
	WorkDir string
}

// Report is what Verify found.
type Report struct {
	Chain     snap.Chain
	Revisions int64 // replayed from deltas
	Digest    Digest
	// Download is the full's download and decode, Replay the deltas'
	// replay after it: a restore of the chain on this node takes about as
	// long (Speed).
	Download, Replay, Took time.Duration
}

// Speed is how fast this node restores, as a drill measured it.
func (r Report) Speed() restore.Speed {
	s := restore.Speed{}
	if r.Download > 0 {
		s.BytesPerSecond = float64(r.Chain.Full.Size) / r.Download.Seconds()
	}
	if r.Replay > 0 && r.Revisions > 0 {
		s.RevisionsPerSecond = float64(r.Revisions) / r.Replay.Seconds()
	}
	return s
}

// Verify downloads and replays a chain as Restore does, without building a
// data dir, and sums the keyspace at the chain's last revision. Compared
// with LiveDigest at the same revision it proves a backup exact.
func Verify(ctx context.Context, st store.Store, opts VerifyOptions) (Report, error) {
	start := time.Now()
	var d Digest
	res, err := restore.Replay(ctx, st, opts.Read, restore.ReplayOptions{WorkDir: opts.WorkDir, What: "verify"}, func(p *restore.Past) (err error) {
		d, err = digest(ctx, p)
		return err
	})
	if err != nil {
		return Report{}, err
	}
	return Report{Chain: res.Chain, Revisions: res.Revisions, Digest: d, Download: res.Download, Replay: res.Replay, Took: time.Since(start)}, nil
}
