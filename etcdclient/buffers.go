package etcdclient

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// buffers is the client's gRPC buffer pool. gRPC's default has tiers of
// 256 B, 4, 16 and 32 KiB and 1 MiB, and clears a buffer's whole capacity
// on every Get: each 32 KiB chunk of a snapshot (a few bytes over the
// 32 KiB tier) took a 1 MiB buffer and cleared all of it, which was most of
// a full snapshot's receive cost. Here every power of two from 256 B to
// 4 MiB is a tier, and only the length asked for is cleared: the rest of
// the capacity is never handed out.
type buffers struct {
	tiers [tierCount]sync.Pool
}

const (
	minTierShift = 8
	maxTierShift = 22
	tierCount    = maxTierShift - minTierShift + 1
)

var _ mem.BufferPool = (*buffers)(nil)

// tier is the smallest tier that holds n bytes, or -1 when none does.
func tier(n int) int {
	if n <= 1<<minTierShift {
		return 0
	}
	t := bits.Len(uint(n-1)) - minTierShift
	if t >= tierCount {
		return -1
	}
	return t
}

func (p *buffers) Get(length int) *[]byte {
	t := tier(length)
	if t < 0 {
		b := make([]byte, length)
		return &b
	}
	if bp, ok := p.tiers[t].Get().(*[]byte); ok {
		b := (*bp)[:length]
		clear(b)
		*bp = b
		return bp
	}
	b := make([]byte, length, 1<<(t+minTierShift))
	return &b
}

func (p *buffers) Put(bp *[]byte) {
	c := cap(*bp)
	t := tier(c)
	// Only a buffer of exactly a tier's size goes back: a smaller one
	// could not serve every Get of its tier.
	if t < 0 || c != 1<<(t+minTierShift) {
		return
	}
	p.tiers[t].Put(bp)
}
