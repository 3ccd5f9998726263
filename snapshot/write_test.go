package snapshot

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/etcdkit/etcdkit/store"
)

// Two writers of one object name: the first wins, a retry of its own
// write that finds its object there is no error, and the other writer is
// told it came second (ErrConflict), naming two uploaders on one prefix.
func TestSecondWriterIsReported(t *testing.T) {
	ctx := context.Background()
	file, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]store.Store{"mem": store.NewMem(), "file": file} {
		t.Run(name, func(t *testing.T) {
			write := func(body string) error {
				_, err := put(ctx, st, "v2/Incr-00000002-00000009-1700000000.gz", Codec{Compression: Gzip}, lean, func(w io.Writer) error {
					_, err := io.WriteString(w, body)
					return err
				})
				return err
			}
			if err := write("first"); err != nil {
				t.Fatal(err)
			}
			if err := write("first"); err != nil {
				t.Fatalf("the same bytes again (a retry that landed): %v", err)
			}
			err := write("second")
			if !errors.Is(err, ErrConflict) || !errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), "two uploaders on one prefix") {
				t.Fatalf("another writer's bytes: %v", err)
			}
			t.Log(err)
			rc, err := st.Get(ctx, "v2/Incr-00000002-00000009-1700000000.gz")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = rc.Close() }()
			zr, err := gzip.NewReader(rc)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(zr)
			if string(b) != "first" {
				t.Fatalf("the object is %q, not the first writer's", b)
			}
		})
	}
}
