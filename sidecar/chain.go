package sidecar

import (
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/compact"
	"github.com/etcdkit/etcdkit/snapshot"
)

// chainState is the latest chain as this sidecar wrote it: what its
// metrics, its compaction threshold and its restore estimate read.
type chainState struct {
	mu                      sync.Mutex
	fullRev, fullSize, revs int64 // revs: the deltas' revisions past the full
	deltas                  int
	lastUpload              time.Time
	compacting              bool
	// compacted is the last full snapshot a compaction wrote, which the
	// Snapshotter did not take.
	compacted snapshot.Snapshot
}

// load starts from what the store holds.
func (c *chainState) load(chain snapshot.Chain) (deltas int, revs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fullRev, c.deltas, c.fullSize = chain.Full.LastRevision, len(chain.Deltas), chain.Full.Size
	c.revs = chain.LastRevision() - chain.Full.LastRevision
	return c.deltas, c.revs
}

// uploaded records a snapshot the Snapshotter wrote.
func (c *chainState) uploaded(r capture.Result) (deltas int, revs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.Op {
	case capture.OpFull:
		c.fullRev, c.deltas, c.revs, c.fullSize = r.Snapshot.LastRevision, 0, 0, r.Snapshot.Size
		c.lastUpload = time.Now()
	case capture.OpDelta:
		c.deltas++
		c.revs = r.Snapshot.LastRevision - c.fullRev
		c.lastUpload = time.Now()
	}
	return c.deltas, c.revs
}

// consolidated records a compaction's new full snapshot.
func (c *chainState) consolidated(con compact.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if con.Snapshot.LastRevision >= c.fullRev {
		c.fullRev, c.fullSize = con.Snapshot.LastRevision, con.OutputBytes
		c.deltas, c.revs = 0, 0
	}
	c.compacted = con.Snapshot
}

// begin marks a compaction as running; false when one runs already.
func (c *chainState) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.compacting {
		return false
	}
	c.compacting = true
	return true
}

// end marks the compaction as over.
func (c *chainState) end() {
	c.mu.Lock()
	c.compacting = false
	c.mu.Unlock()
}

// shape is the chain as far as a restore estimate reads it: the full's
// revision and size, and the revisions its deltas cover.
func (c *chainState) shape() snapshot.Chain {
	c.mu.Lock()
	defer c.mu.Unlock()
	return snapshot.Chain{Full: snapshot.Snapshot{LastRevision: c.fullRev, Size: c.fullSize},
		Deltas: []snapshot.Snapshot{{LastRevision: c.fullRev + c.revs}}}
}

// lastUploaded is when the newest snapshot landed; zero before one.
func (c *chainState) lastUploaded() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastUpload
}

// withCompacted is st with a compaction's full snapshot as its LastFull
// when that is the later one.
func (c *chainState) withCompacted(st capture.Status) capture.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.compacted.LastRevision > st.LastFull.LastRevision {
		st.LastFull = c.compacted
	}
	return st
}
