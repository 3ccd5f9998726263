package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/restore"
)

// On a terminal the bar counts revisions of the chain's total with an
// ETA, and a log line is printed above it, never onto it.
func TestProgress(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, true)
	p.Update(restore.Progress{BytesDownloaded: 10 << 20, BytesTotal: 10 << 20, Revisions: 0, RevisionsTotal: 1000})
	time.Sleep(150 * time.Millisecond)
	p.Update(restore.Progress{BytesDownloaded: 10 << 20, BytesTotal: 10 << 20, Revisions: 250, RevisionsTotal: 1000})
	if !strings.Contains(out.String(), "replayed 250 of 1000 revisions, ETA ") || !strings.Contains(out.String(), " 25%") {
		t.Fatalf("bar: %q", out.String())
	}
	out.Reset()
	if _, err := p.Write([]byte("time=… level=INFO msg=restored\n")); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.HasPrefix(got, clearLine+"time=") || !strings.HasSuffix(got, "revisions, ETA "+strings.SplitAfter(got, "ETA ")[1]) {
		t.Fatalf("a log line over the bar: %q", got)
	}
	p.Done()
	out.Reset()
	if _, err := p.Write([]byte("after\n")); err != nil || out.String() != "after\n" {
		t.Fatalf("after Done: %q %v", out.String(), err)
	}
	// Not a terminal: no bar at all.
	out.Reset()
	q := newProgress(&out, false)
	q.Update(restore.Progress{Revisions: 1, RevisionsTotal: 2})
	if out.Len() != 0 {
		t.Fatalf("drew on a file: %q", out.String())
	}
}
