package etcdclient

import (
	"bytes"
	"testing"
)

func TestBuffersFitAndComeBackCleared(t *testing.T) {
	var p buffers
	for _, n := range []int{0, 1, 256, 257, 4096, 32<<10 + 5, 1 << 20, 1<<20 + 1, 4 << 20} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n || cap(*b) > 2*n && cap(*b) > 256 {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		for i := range *b {
			(*b)[i] = 0xff
		}
		p.Put(b)
		// Whatever the pool hands out next for n, reused or not, is
		// cleared over its whole length.
		again := p.Get(n)
		if !bytes.Equal(*again, make([]byte, n)) {
			t.Fatalf("Get(%d) after a Put: not cleared", n)
		}
	}
	// Past the largest tier: a plain allocation, never pooled.
	big := p.Get(4<<20 + 1)
	if len(*big) != 4<<20+1 {
		t.Fatalf("Get past the tiers: len %d", len(*big))
	}
	p.Put(big)
	// A buffer that is not a tier's size is dropped, not pooled.
	odd := make([]byte, 300)
	p.Put(&odd)
	if b := p.Get(300); cap(*b) != 512 {
		t.Fatalf("Get(300) after a Put of a 300-byte buffer: cap %d, want the 512 B tier", cap(*b))
	}
}
