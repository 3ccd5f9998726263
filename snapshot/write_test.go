package snapshot

import (
	"compress/gzip"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdkit/etcdkit/store"
)

// Two writers of one object name: the first wins, a retry of its own
// write that finds its object there is no error, and the other writer is
// told it came second (ErrConflict), naming two uploaders on one prefix.
func TestSecondWriterIsReported(t *testing.T) {
	ctx := context.Background()
	file, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]store.Store{"mem": store.NewMem(), "file": file} {
		t.Run(name, func(t *testing.T) {
			write := func(body string) error {
				_, err := put(ctx, st, "v2/Incr-00000002-00000009-1700000000.gz", Codec{Compression: Gzip}, lean, func(w io.Writer) error {
					_, err := io.WriteString(w, body)
					return err
				})
				return err
			}
			if err := write("first"); err != nil {
				t.Fatal(err)
			}
			if err := write("first"); err != nil {
				t.Fatalf("the same bytes again (a retry that landed): %v", err)
			}
			err := write("second")
			if !errors.Is(err, ErrConflict) || !errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), "two uploaders on one prefix") {
				t.Fatalf("another writer's bytes: %v", err)
			}
			t.Log(err)
			rc, err := st.Get(ctx, "v2/Incr-00000002-00000009-1700000000.gz")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = rc.Close() }()
			zr, err := gzip.NewReader(rc)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(zr)
			if string(b) != "first" {
				t.Fatalf("the object is %q, not the first writer's", b)
			}
		})
	}
}

// A key both pasts lack says nothing of whether they are one; only a key
// written at the same revision with the same contents does, and one that
// differs says they are two.
func TestJudge(t *testing.T) {
	put := KeyVersion{Key: []byte("k"), Create: 5, Mod: 9, Version: 2, Value: crc32.Checksum([]byte("v"), castagnoli)}
	del := KeyVersion{Key: []byte("k"), Mod: 9, Deleted: true}
	same := &mvccpb.KeyValue{Key: []byte("k"), CreateRevision: 5, ModRevision: 9, Version: 2, Value: []byte("v")}
	other := &mvccpb.KeyValue{Key: []byte("k"), CreateRevision: 5, ModRevision: 9, Version: 2, Value: []byte("w")}
	later := &mvccpb.KeyValue{Key: []byte("k"), CreateRevision: 5, ModRevision: 20, Version: 3, Value: []byte("x")}
	for _, tc := range []struct {
		name  string
		want  KeyVersion
		got   *mvccpb.KeyValue
		atRev bool
		is    evidence
	}{
		{"put, same", put, same, true, evidenceSame},
		{"put, other value", put, other, true, evidenceDiffers},
		{"put, absent", put, nil, true, evidenceDiffers},
		{"deleted, absent", del, nil, true, evidenceNone},
		{"deleted, present", del, same, true, evidenceDiffers},
		{"compacted: put, same now", put, same, false, evidenceSame},
		{"compacted: put, written since", put, later, false, evidenceNone},
		{"compacted: deleted, absent now", del, nil, false, evidenceNone},
	} {
		if got, _ := judge(tc.want, tc.got, 10, tc.atRev); got != tc.is {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.is)
		}
	}
}
