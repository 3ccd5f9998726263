package history_test

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdkit/etcdkit/history"
)

func TestSubPrefixes(t *testing.T) {
	for _, c := range []struct {
		prefix string
		depth  int
		key    string
		want   string
	}{
		{"/registry/", 1, "/registry/pods/ns/a", "/registry/pods/"},
		{"/registry/", 2, "/registry/pods/ns/a", "/registry/pods/ns/"},
		{"/registry/", 3, "/registry/pods/ns/a", "/registry/pods/ns/"},
		{"/registry", 1, "/registry/pods/ns/a", "/registry/pods/"},
		{"", 1, "/registry/pods/ns/a", "/registry/"},
		{"/registry/", 1, "/registry/ranges", "/registry/"},
		{"/registry/", 1, "/registry/", "/registry/"},
		{"/t/", 1, "/other", ""},
	} {
		if got := history.SubPrefixOf(c.prefix, c.depth, c.key); got != c.want {
			t.Errorf("SubPrefixOf(%q, %d, %q) = %q, want %q", c.prefix, c.depth, c.key, got, c.want)
		}
	}
	kv := func(k, v string, mod int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v), ModRevision: mod}
	}
	a := history.State{KVs: []*mvccpb.KeyValue{kv("/r/pods/a", "1", 1), kv("/r/pods/b", "2", 2), kv("/r/secrets/s", "x", 3)}}
	b := history.State{KVs: []*mvccpb.KeyValue{kv("/r/pods/a", "1", 1), kv("/r/pods/b", "22", 5), kv("/r/pods/c", "3", 6)}}
	got := history.SummarizeDiff("/r/", 1, a, b)
	want := []history.SubPrefix{
		{Prefix: "/r/pods/", Keys: 3, Bytes: 31, Created: 1, Changed: 1, BytesBefore: 20},
		{Prefix: "/r/secrets/", Deleted: 1, BytesBefore: 13},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("SummarizeDiff: %+v, want %+v", got, want)
	}
	if got := history.Summarize("/r/", 1, b.KVs); len(got) != 1 || got[0] != (history.SubPrefix{Prefix: "/r/pods/", Keys: 3, Bytes: 31}) {
		t.Fatalf("Summarize: %+v", got)
	}
}
