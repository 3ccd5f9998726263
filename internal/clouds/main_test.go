package clouds_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
)

// The tests share one emulator of each kind, each on a bucket of its own.
func TestMain(m *testing.M) { os.Exit(emulator.Run(m)) }

var (
	start      = chaintest.Start
	checkChain = chaintest.CheckReplay
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
