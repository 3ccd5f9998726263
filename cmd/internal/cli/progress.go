package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/etcdkit/etcdkit/restore"
)

// Progress draws a restore's progress on one terminal line, at most ten
// times a second, and nothing when its writer is not a terminal. It is
// also the writer of the log: a log line clears the bar, prints on a line
// of its own, and the bar is drawn again below it, so the two never mix.
type Progress struct {
	w     io.Writer
	on    bool
	mu    sync.Mutex
	last  time.Time
	start time.Time
	// line is the bar on screen, "" when none is.
	line string
}

// NewProgress draws on f when it is a terminal.
func NewProgress(f *os.File) *Progress {
	return newProgress(f, term.IsTerminal(int(f.Fd())))
}

func newProgress(w io.Writer, tty bool) *Progress { return &Progress{w: w, on: tty} }

// clearLine returns the cursor to the line's start and erases it.
const clearLine = "\r\033[K"

// Write writes a log line above the bar.
func (p *Progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line == "" {
		return p.w.Write(b)
	}
	if _, err := io.WriteString(p.w, clearLine); err != nil {
		return 0, err
	}
	n, err := p.w.Write(b)
	if err == nil {
		_, err = io.WriteString(p.w, p.line)
	}
	return n, err
}

// Update is a restore.ReadOptions.Progress.
func (p *Progress) Update(r restore.Progress) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.start.IsZero() {
		p.start = now
	}
	if now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	p.line = bar(r, now.Sub(p.start))
	_, _ = io.WriteString(p.w, clearLine+p.line)
}

// bar is the progress line: the download, then the revisions replayed out
// of the chain's, and the time left at the pace so far.
func bar(r restore.Progress, elapsed time.Duration) string {
	done, total := float64(r.BytesDownloaded), float64(r.BytesTotal)
	what := fmt.Sprintf("downloaded %s of %s", mib(r.BytesDownloaded), mib(r.BytesTotal))
	if r.RevisionsTotal > 0 && (r.Revisions > 0 || r.BytesDownloaded >= r.BytesTotal) {
		done, total = float64(r.Revisions), float64(r.RevisionsTotal)
		what = fmt.Sprintf("replayed %d of %d revisions", r.Revisions, r.RevisionsTotal)
	}
	frac := 0.0
	if total > 0 {
		frac = min(1, done/total)
	}
	eta := "ETA --"
	if frac > 0.01 {
		left := time.Duration(float64(elapsed) * (1 - frac) / frac)
		eta = "ETA " + left.Round(time.Second).String()
	}
	n := int(20 * frac)
	return fmt.Sprintf("[%s%s] %3.0f%% %s, %s", strings.Repeat("#", n), strings.Repeat(" ", 20-n), 100*frac, what, eta)
}

// Done ends the progress line.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line != "" {
		_, _ = fmt.Fprintln(p.w)
		p.line = ""
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
