package clouds_test

import (
	"os"
	"testing"

	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/internal/emulator"
)

// The tests share one emulator of each kind, each on a bucket of its own.
func TestMain(m *testing.M) { os.Exit(emulator.Run(m)) }

var (
	newStore   = chaintest.NewStore
	ctxT       = chaintest.Ctx
	start      = chaintest.Start
	checkChain = chaintest.CheckReplay
)
