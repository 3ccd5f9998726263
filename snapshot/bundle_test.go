package snapshot_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// A restore bundle: written sealed beside a full only when its files
// changed, taken by a restore of any later chain, extracted by the paths
// it was taken from without overwriting a file, unreadable without the
// identity, kept by retention while a kept full takes it, and copied with
// the fulls that take it.
func TestRestoreBundle(t *testing.T) {
	ctx := t.Context()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	seal := snapshot.Codec{Recipients: []age.Recipient{id.Recipient()}}
	open := snapshot.Codec{Identities: []age.Identity{id}}
	src := t.TempDir()
	pki := filepath.Join(src, "pki")
	enc := filepath.Join(src, "encryption.yaml")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(pki, "ca.key"), "the CA's key")
	write(filepath.Join(pki, "etcd", "ca.crt"), "etcd's CA")
	write(enc, "aescbc key one")
	paths := []string{pki, enc}

	st := store.NewMem()
	f1, f2, f3 := full(10, t0), full(20, t0.Add(time.Hour)), full(30, t0.Add(2*time.Hour))
	putAll(ctx, t, st, []snapshot.Snapshot{f1, f2, f3})
	if _, _, err := snapshot.WriteBundle(ctx, st, f1, paths, snapshot.Codec{}); !errors.Is(err, snapshot.ErrBundleNotSealed) {
		t.Fatalf("a bundle without recipients: %v", err)
	}
	b1, wrote, err := snapshot.WriteBundle(ctx, st, f1, paths, seal)
	if err != nil || !wrote {
		t.Fatalf("first bundle: %v, %v", wrote, err)
	}
	if _, wrote, err := snapshot.WriteBundle(ctx, st, f2, paths, seal); err != nil || wrote {
		t.Fatalf("unchanged files wrote a bundle: %v, %v", wrote, err)
	}
	write(enc, "aescbc key two, key one")
	b3, wrote, err := snapshot.WriteBundle(ctx, st, f3, paths, seal)
	if err != nil || !wrote || b3.Digest == b1.Digest {
		t.Fatalf("changed files: %+v, %v, %v", b3, wrote, err)
	}
	// Nothing of the files is readable on the store.
	rc, err := st.Get(ctx, b1.Key)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 4096)
	n, _ := rc.Read(raw)
	_ = rc.Close()
	if strings.Contains(string(raw[:n]), "aescbc") || strings.Contains(string(raw[:n]), "CA's key") {
		t.Fatal("the bundle holds its files in the clear")
	}
	bundles, err := snapshot.ListBundles(ctx, st)
	if err != nil || len(bundles) != 2 {
		t.Fatalf("bundles %+v, %v", bundles, err)
	}
	for _, tc := range []struct {
		full snapshot.Snapshot
		want string
	}{{f1, b1.Key}, {f2, b1.Key}, {f3, b3.Key}} {
		if b, ok := snapshot.BundleFor(bundles, tc.full); !ok || b.Key != tc.want {
			t.Fatalf("the bundle of %s: %s, want %s", tc.full.Key, b.Key, tc.want)
		}
	}
	if _, ok := snapshot.BundleFor(bundles, full(5, t0.Add(-time.Hour))); ok {
		t.Fatal("a full older than every bundle took one")
	}

	dir := t.TempDir()
	if _, err := snapshot.ExtractBundle(ctx, st, b1, seal, dir); err == nil {
		t.Fatal("a bundle opened without an identity")
	}
	other, _ := age.GenerateX25519Identity()
	if _, err := snapshot.ExtractBundle(ctx, st, b1, snapshot.Codec{Identities: []age.Identity{other}}, dir); err == nil {
		t.Fatal("a bundle opened with another identity")
	}
	files, err := snapshot.ExtractBundle(ctx, st, b1, open, dir)
	if err != nil || len(files) != 3 {
		t.Fatalf("extracted %v, %v", files, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, enc))
	if err != nil || string(got) != "aescbc key one" {
		t.Fatalf("the first bundle's encryption.yaml: %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, pki, "ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key: %v, %v", fi, err)
	}
	if _, err := snapshot.ExtractBundle(ctx, st, b3, open, dir); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("extracting over files: %v", err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, enc)); string(again) != "aescbc key one" {
		t.Fatal("a refused extraction overwrote a file")
	}

	// Retention keeping f2 and f3 keeps b1 (f2 takes it) and b3; keeping
	// f3 alone lets b1 go.
	clock := func() time.Time { return t0.Add(3 * time.Hour) }
	second := store.NewMem()
	if _, err := snapshot.Copy(ctx, st, second, snapshot.CopyOptions{MaxChains: 2}); err != nil {
		t.Fatal(err)
	}
	if copied, _ := snapshot.ListBundles(ctx, second); len(copied) != 2 {
		t.Fatalf("the second site got %d bundles, want both (the copied f2 takes b1)", len(copied))
	}
	res, err := snapshot.GC(ctx, st, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 2}, snapshot.GCOptions{Now: clock})
	if err != nil || res.BundlesDeleted != 0 {
		t.Fatalf("GC keeping two fulls deleted %d bundles, %v", res.BundlesDeleted, err)
	}
	res, err = snapshot.GC(ctx, st, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1}, snapshot.GCOptions{Now: clock})
	if err != nil || res.BundlesDeleted != 1 {
		t.Fatalf("GC keeping one full deleted %d bundles, %v", res.BundlesDeleted, err)
	}
	if left, _ := snapshot.ListBundles(ctx, st); len(left) != 1 || left[0].Key != b3.Key {
		t.Fatalf("bundles left: %+v", left)
	}
}
