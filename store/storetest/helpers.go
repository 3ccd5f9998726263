package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/etcdkit/etcdkit/store"
)

// UseURL opens url the way a deployment does, with store.Open, and puts
// and lists one object: the smoke test of a configuration. It fails the
// test on any error.
func UseURL(t *testing.T, url string) {
	t.Helper()
	ctx := ctxFor(t)
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, ctx, st, "k", []byte("v"))
	if objs := mustList(t, ctx, st, ""); len(objs) != 1 || objs[0].Key != "k" {
		t.Fatalf("list after one put: %v", keys(objs))
	}
	if got := string(mustGet(t, ctx, st, "k")); got != "v" {
		t.Fatalf("got %q", got)
	}
}

// Locked checks a store whose bucket locks every object it holds (a
// default retention, write once, read many): objects are written once,
// a small one and one of several parts, and read back; writing a key
// again is ErrExists; deleting is ErrLocked, and the object stays whole
// and listed.
func Locked(t *testing.T, st store.Store, opts store.Options) {
	t.Helper()
	ctx := ctxFor(t)
	large := make([]byte, 2*opts.WithDefaults().PartSize+1)
	for i := range large {
		large[i] = byte(i * 7)
	}
	objects := map[string][]byte{"v2/Full-00000000-00000010-1700000000": []byte("full"), "v2/Full-00000000-00000020-1700000100": large}
	for key, data := range objects {
		mustPut(t, ctx, st, key, data)
		if err := st.Put(ctx, key, bytes.NewReader([]byte("again"))); !errors.Is(err, store.ErrExists) {
			t.Fatalf("put %s again on a locked bucket: %v, want ErrExists", key, err)
		}
		if err := st.Delete(ctx, key); !errors.Is(err, store.ErrLocked) {
			t.Fatalf("delete %s on a locked bucket: %v, want ErrLocked", key, err)
		}
		if got := mustGet(t, ctx, st, key); !bytes.Equal(got, data) {
			t.Fatalf("%s after a refused overwrite and delete: %d bytes, want its %d", key, len(got), len(data))
		}
	}
	if objs := mustList(t, ctx, st, "v2/"); len(objs) != len(objects) {
		t.Fatalf("listed %v, want the %d locked objects", keys(objs), len(objects))
	}
}
