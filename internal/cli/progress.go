package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/etcdkit/etcdkit/restore"
)

// Progress draws a restore's progress on one terminal line, at most ten
// times a second, and nothing when w is not a terminal.
type Progress struct {
	w    io.Writer
	on   bool
	mu   sync.Mutex
	last time.Time
	// drawn: a line is on screen and Done must end it.
	drawn bool
}

// NewProgress draws on w when it is a terminal.
func NewProgress(w *os.File) *Progress {
	return &Progress{w: w, on: term.IsTerminal(int(w.Fd()))}
}

// Update is a restore.Source.Progress.
func (p *Progress) Update(r restore.Progress) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	bar := ""
	if r.BytesTotal > 0 {
		done := int(20 * r.BytesDownloaded / r.BytesTotal)
		bar = fmt.Sprintf("[%-20s] ", string(repeat('#', done)))
	}
	fmt.Fprintf(p.w, "\r%sdownloaded %s of %s, replayed %d revisions  ", bar, mib(r.BytesDownloaded), mib(r.BytesTotal), r.Revisions)
	p.drawn = true
}

// Done ends the progress line.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

func repeat(b byte, n int) []byte {
	out := make([]byte, max(0, n))
	for i := range out {
		out[i] = b
	}
	return out
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
