package storetest

import (
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
