package store_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// The optional interfaces of a file store are found through any stack of
// views, each prefix in its place; a store without them has none.
func TestOptionalInterfacesThroughViews(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := store.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := store.WithPrefix(store.Bounded(fs, time.Minute), "region/eu")
	if err != nil {
		t.Fatal(err)
	}
	outer, err := store.WithPrefix(store.Bounded(inner, time.Minute), "cluster-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := store.AsSweeper(outer); !ok {
		t.Fatal("no Sweeper through the views")
	}
	local, ok := store.AsLocal(outer)
	if !ok {
		t.Fatal("no Local through the views")
	}
	if err := outer.Put(ctx, "v2/k", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	p, err := local.Path("v2/k")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "region", "eu", "cluster-a", "v2", "k"); p != want {
		t.Fatalf("path %s, want %s", p, want)
	}
	stager, ok := store.AsStager(outer)
	if !ok {
		t.Fatal("no Stager through the views")
	}
	f, err := stager.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("staged"); err != nil {
		t.Fatal(err)
	}
	if err := stager.PutStaged(ctx, "v2/staged", f); err != nil {
		t.Fatal(err)
	}
	rc, err := outer.Get(ctx, "v2/staged")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != "staged" {
		t.Fatalf("the staged object reads %q through the views", b)
	}
	mem, err := store.WithPrefix(store.Bounded(store.NewMem(), time.Minute), "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := store.AsLocal(mem); ok {
		t.Fatal("a mem store's view is Local")
	}
	if _, ok := store.AsStager(mem); ok {
		t.Fatal("a mem store's view is a Stager")
	}
}
