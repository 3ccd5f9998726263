package store_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdkit/etcdkit/store"
)

func TestFileStagerRenamesIntoPlace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := store.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	view, err := store.WithPrefix(fs, "cluster-a")
	if err != nil {
		t.Fatal(err)
	}
	stager, ok := store.AsStager(view)
	if !ok {
		t.Fatal("a prefixed file store is no Stager")
	}
	f, err := stager.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("staged bytes"); err != nil {
		t.Fatal(err)
	}
	if objs, _ := fs.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("a staged file is listed: %v", objs)
	}
	if err := stager.PutStaged(ctx, "v2/object", f); err != nil {
		t.Fatal(err)
	}
	rc, err := fs.Get(ctx, "cluster-a/v2/object")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(got) != "staged bytes" {
		t.Fatalf("object holds %q", got)
	}
	if _, err := os.Stat(f.Name()); !os.IsNotExist(err) {
		t.Fatalf("the staged file is still there: %v", err)
	}

	// A file the store did not stage is refused and removed.
	foreign, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := stager.PutStaged(ctx, "v2/other", foreign); err == nil || !strings.Contains(err.Error(), "not a file this store staged") {
		t.Fatalf("foreign file: %v", err)
	}
	local, ok := store.AsLocal(view)
	if !ok {
		t.Fatal("a prefixed file store is not Local")
	}
	if p, err := local.Path("v2/object"); err != nil || p != filepath.Join(dir, "cluster-a", "v2", "object") {
		t.Fatalf("path %q, %v", p, err)
	}
	if _, ok := store.AsLocal(store.NewMem()); ok {
		t.Fatal("the mem store claims local files")
	}
	if _, ok := store.AsStager(store.NewMem()); ok {
		t.Fatal("the mem store claims to stage local files")
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, ".etcdkit-tmp-*")); len(entries) != 0 {
		t.Fatalf("staged files left: %v", entries)
	}
}
