package snapshot_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

func putObjects(t *testing.T, st store.Store, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := st.Put(context.Background(), k, strings.NewReader("body of "+k)); err != nil {
			t.Fatal(err)
		}
	}
}

func storeKeys(t *testing.T, st store.Store) []string {
	t.Helper()
	objs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	slices.Sort(out)
	return out
}

// Copy takes whole chains, newest first within the limits, skips what
// the target holds, drops .final, and leaves the bytes as they were.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	day := int64(24 * 3600)
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).Unix()
	name := func(kind string, start, last int64, created int64, suffix string) string {
		return fmt.Sprintf("v2/%s-%08d-%08d-%d.gz%s", kind, start, last, created, suffix)
	}
	old := []string{name("Full", 0, 10, base, ""), name("Incr", 11, 20, base+60, "")}
	mid := []string{name("Full", 0, 20, base+day, ""), name("Incr", 21, 30, base+day+60, "")}
	newest := []string{name("Full", 0, 30, base+2*day, ".final")}
	orphan := name("Incr", 1, 5, base-60, "") // before any full: no chain's
	src, dst := store.NewMem(), store.NewMem()
	putObjects(t, src, append(append(append(old, mid...), newest...), orphan)...)
	putObjects(t, dst, mid[0])
	now := func() time.Time { return time.Unix(base+2*day+3600, 0) }

	res, err := snapshot.Copy(ctx, src, dst, snapshot.CopyOptions{MaxChains: 2, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{mid[0], strings.TrimSuffix(newest[0], ".final"), mid[1]}
	if got := storeKeys(t, dst); !slices.Equal(got, want) {
		t.Fatalf("target holds %v, want %v", got, want)
	}
	if !slices.Equal(res.Skipped, []string{mid[0]}) || len(res.Copied) != 2 {
		t.Fatalf("result %+v", res)
	}
	r, err := dst.Get(ctx, want[1])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	_ = r.Close()
	if string(b) != "body of "+newest[0] {
		t.Fatalf("copied bytes %q", b)
	}

	// Age: only the chains whose full is younger than 36h.
	dst2 := store.NewMem()
	if _, err := snapshot.Copy(ctx, src, dst2, snapshot.CopyOptions{MaxAge: 36 * time.Hour, Now: now, Parallel: 1}); err != nil {
		t.Fatal(err)
	}
	if got := storeKeys(t, dst2); !slices.Equal(got, want) {
		t.Fatalf("by age the target holds %v, want %v", got, want)
	}

	// Waiting for a final full: found at once here; without one, the
	// wait ends at its timeout and the copy goes on.
	res, err = snapshot.Copy(ctx, src, store.NewMem(), snapshot.CopyOptions{WaitForFinal: true, PollInterval: 10 * time.Millisecond})
	if err != nil || !res.FinalSeen || len(res.Copied) != 5 {
		t.Fatalf("wait for final: %+v, %v", res, err)
	}
	noFinal := store.NewMem()
	putObjects(t, noFinal, old...)
	start := time.Now()
	res, err = snapshot.Copy(ctx, noFinal, store.NewMem(), snapshot.CopyOptions{WaitForFinal: true, WaitTimeout: 100 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	if err != nil || res.FinalSeen || len(res.Copied) != 2 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("wait for a final that never comes: %+v, %v", res, err)
	}
}
