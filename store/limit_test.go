package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/etcdkit/etcdkit/store"
)

// A limited store moves the same bytes; a transfer paced behind another
// ends with its context; a file store and no limit are left as they are.
func TestLimited(t *testing.T) {
	ctx := t.Context()
	mem := store.NewMem()
	st := store.Limited(mem, store.NewLimits(8<<20, 8<<20))
	data := bytes.Repeat([]byte("etcdkit "), 64<<10) // 512 KiB, a sixteenth of a second each way
	if err := st.Put(ctx, "k", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	rc, err := st.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes of %d: %v", len(got), len(data), err)
	}
	// A cap of a byte a second: the second read waits for the first's
	// 256 KiB, and the cancelled context ends it.
	slow := store.Limited(mem, store.NewLimits(0, 1))
	rc, err = slow.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	rc2, err := slow.Get(cctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(make([]byte, 1<<10)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(rc2); !errors.Is(err, context.Canceled) {
		t.Fatalf("a paced read after its context ended: %v", err)
	}
	_ = rc.Close()
	_ = rc2.Close()

	file, err := store.Open(ctx, "file://"+filepath.ToSlash(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if store.Limited(file, store.NewLimits(1, 1)) != file || store.Limited(mem, store.NewLimits(0, 0)) != store.Store(mem) {
		t.Fatal("a file store or no cap was wrapped")
	}
}
