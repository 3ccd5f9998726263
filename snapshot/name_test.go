package snapshot_test

import (
	"errors"
	"path"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
)

func TestParseNames(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want snapshot.Snapshot
	}{
		{"v2/Full-00000000-00001234-1700000000", snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 1234}},
		{"v2/Incr-00001235-00001300-1700000060.gz", snapshot.Snapshot{Kind: snapshot.KindDelta, StartRevision: 1235, LastRevision: 1300, Compression: snapshot.Gzip}},
		{"v2/Full-00000000-00000010-1700000000.zlib", snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 10, Compression: snapshot.Zlib}},
		{"v2/Full-00000000-00000010-1700000000.Z", snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 10, Compression: snapshot.LZW}},
		{"v2/Full-00000000-00000010-1700000000.zst.age", snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 10, Compression: snapshot.Zstd, Encrypted: true}},
		{"v2/Full-00000000-00000010-1700000000.gz.final", snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 10, Compression: snapshot.Gzip, Final: true}},
		{"v2/Full-00000000-00000010-1700000000.age.final", snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 10, Encrypted: true, Final: true}},
		{"v2/Incr-100000000-123456789-1700000000", snapshot.Snapshot{Kind: snapshot.KindDelta, StartRevision: 100000000, LastRevision: 123456789}},
		{"v1/Backup-1600000000/Full-00000000-00000042-1600000000", snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 42}},
	} {
		got, err := snapshot.Parse(tc.key)
		if err != nil {
			t.Errorf("%s: %v", tc.key, err)
			continue
		}
		tc.want.Key = tc.key
		tc.want.Created = got.Created
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.key, got, tc.want)
		}
		if got.Created.Unix() < 1600000000 || got.Created.Location() != time.UTC {
			t.Errorf("%s: created %v", tc.key, got.Created)
		}
		if got.Name() != tc.key[len(tc.key)-len(got.Name()):] {
			t.Errorf("%s: Name() gives %s back", tc.key, got.Name())
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, key := range []string{
		"Full-00000000-00000010-1700000000",            // no layout directory
		"v2/Full-00000000-00000010",                    // no time
		"v2/Snap-00000000-00000010-1700000000",         // unknown kind
		"v2/Incr-00000020-00000010-1700000000",         // start after last
		"v2/Incr-0000000a-00000010-1700000000",         // not a number
		"v2/Incr-+0000001-00000010-1700000000",         // sign
		"v2/Full-00000000-00000010-1700000000.bz2",     // unknown suffix
		"v2/Full-00000000-00000010-1700000000.age.gz",  // suffixes out of order
		"v2/Full-00000000-00000010-1700000000/0000001", // chunk of a chunked upload
		"v1/Full-00000000-00000010-1700000000",         // v1 needs its Backup directory
		"v2/.etcdkit-tmp-123",
	} {
		if _, err := snapshot.Parse(key); !errors.Is(err, snapshot.ErrBadName) {
			t.Errorf("%s: got %v, want ErrBadName", key, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"v2/Full-00000000-00001234-1700000000",
		"v2/Incr-00001235-00001300-1700000060.zst.age.final",
		"v1/Backup-1600000000/Full-00000000-00000042-1600000000.Z",
		"v2/Incr--1-2-3",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		s, err := snapshot.Parse(key)
		if err != nil {
			return
		}
		if s.StartRevision > s.LastRevision || s.StartRevision < 0 {
			t.Fatalf("%q parsed to revisions %d-%d", key, s.StartRevision, s.LastRevision)
		}
		again, err := snapshot.Parse(path.Dir(key) + "/" + s.Name())
		if err != nil || again.LastRevision != s.LastRevision || again.Kind != s.Kind {
			t.Fatalf("%q: its own name %q does not parse back: %v", key, s.Name(), err)
		}
	})
}
