package restore

import (
	"time"

	snap "github.com/etcdkit/etcdkit/snapshot"
)

// Speed is how fast a node restores: the full snapshot's object bytes
// downloaded and decoded per second, and the deltas' revisions replayed
// per second. A zero field takes the bench machine's speed.
type Speed struct {
	BytesPerSecond     float64
	RevisionsPerSecond float64
}

// A restore's speed on the bench's 2-core machine (bench/README.md,
// restore of a gzip full + 500,000 revisions: 106 MiB in 1.07 s, 231,873
// revisions/s), halved: the estimate before a drill on this node has
// measured its own.
const (
	defaultBytesPerSecond     = 50 << 20
	defaultRevisionsPerSecond = 100000
)

// restoreOverhead is what a restore costs beyond its download and replay:
// the data dir's steps, syncs and the swap.
const restoreOverhead = 2 * time.Second

// EstimateRestore is how long a restore of chain takes at speed s.
func EstimateRestore(chain snap.Chain, s Speed) time.Duration {
	if s.BytesPerSecond <= 0 {
		s.BytesPerSecond = defaultBytesPerSecond
	}
	if s.RevisionsPerSecond <= 0 {
		s.RevisionsPerSecond = defaultRevisionsPerSecond
	}
	revisions := chain.LastRevision() - chain.Full.LastRevision
	secs := float64(chain.Full.Size)/s.BytesPerSecond + float64(revisions)/s.RevisionsPerSecond
	return restoreOverhead + time.Duration(secs*float64(time.Second))
}
