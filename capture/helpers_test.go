package capture_test

import (
	"context"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/store"
)

var (
	start        = chaintest.Start
	checkChain   = chaintest.CheckReplay
	readKeyspace = chaintest.ReadKeyspace
	readDelta    = chaintest.ReadDelta
)

func newStore(t testing.TB) store.Store {
	t.Helper()
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
