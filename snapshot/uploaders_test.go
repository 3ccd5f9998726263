package snapshot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// Records anyone with the bucket's credentials can add, and no one can
// delete from a locked bucket, do not stop the uploaders: one far past
// the others, or outside the ten digits of the records' names, is not
// believed, so a run (re)started takes over; a record that follows the
// others is a second uploader, and stops the older run until it restarts.
func TestForgedUploaderRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st := store.NewMem()
	var u Uploader
	for range 3 {
		var err error
		if u, err = RegisterUploader(ctx, st, Uploader{Host: "sidecar"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{uploaderDir + "/9223372036854775807.json", uploaderDir + "/9999999999.json", uploaderDir + "/0000000999.json", uploaderDir + "/17.json"} {
		if err := putJSON(ctx, st, key, Uploader{Seq: 9999999999, Host: "evil"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := NewerUploader(ctx, st, u); err != nil {
		t.Fatalf("forged records far ahead stop uploader %d: %v", u.Seq, err)
	}
	next, err := RegisterUploader(ctx, st, Uploader{Host: "restarted"})
	if err != nil || next.Seq != u.Seq+1 {
		t.Fatalf("the next run took %d (%v), want %d", next.Seq, err, u.Seq+1)
	}
	// A record right after the newest is another uploader, believed.
	if err := putJSON(ctx, st, uploaderKey(next.Seq+1), Uploader{Seq: next.Seq + 1, Host: "second"}); err != nil {
		t.Fatal(err)
	}
	if err := NewerUploader(ctx, st, next); !errors.Is(err, ErrNewerUploader) || !strings.Contains(err.Error(), "host second") {
		t.Fatalf("a second uploader: %v", err)
	}
	again, err := RegisterUploader(ctx, st, Uploader{Host: "restarted again"})
	if err != nil || again.Seq != next.Seq+2 {
		t.Fatalf("a restart to take over took %d (%v), want %d", again.Seq, err, next.Seq+2)
	}
	if err := NewerUploader(ctx, st, again); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	// A record no run wrote (it does not read back) stops nobody.
	if err := st.Put(ctx, uploaderKey(again.Seq+1), strings.NewReader("{garbage")); err != nil {
		t.Fatal(err)
	}
	if err := NewerUploader(ctx, st, again); err != nil {
		t.Fatalf("beside a garbled record: %v", err)
	}
}
