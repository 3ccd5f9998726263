package capture_test

import "github.com/etcdkit/etcdkit/internal/chaintest"

var (
	newStore     = chaintest.NewStore
	ctxT         = chaintest.Ctx
	start        = chaintest.Start
	checkChain   = chaintest.CheckReplay
	readKeyspace = chaintest.ReadKeyspace
	readDelta    = chaintest.ReadDelta
)
