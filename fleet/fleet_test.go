package fleet_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/drill"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/fleet"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/internal/metricslist"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// counting counts a store's calls.
type counting struct {
	store.Store
	lists, gets atomic.Int64
}

func (c *counting) List(ctx context.Context, prefix string) ([]store.Object, error) {
	c.lists.Add(1)
	return c.Store.List(ctx, prefix)
}

func (c *counting) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

var backUp = chaintest.BackUp

// One bucket holding three clusters' backups, one of them silent for
// days, and an object that is no backup: the scan finds each prefix with
// one listing, sums it up, calls the silent one stale; fleet drills
// restore each far from its cluster and check the digest its sidecar
// recorded, and find the one whose backup no longer matches; the metrics
// say all of it by prefix.
func TestAFleetInOneBucket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	cli := c.Client(t)
	dir := t.TempDir()
	file, err := store.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	bucket := &counting{Store: file}
	a := backUp(t, ctx, cli, file, "seed/shoot--a/etcd-main", "")
	backUp(t, ctx, cli, file, "seed/shoot--b/etcd-main", strings.Repeat("0", 64))
	backUp(t, ctx, cli, file, "seed/shoot--c/etcd-main", "")
	// Prefixes inside prefixes, one of them named as etcdkit's records.
	y := backUp(t, ctx, cli, file, "seed/y", "")
	backUp(t, ctx, cli, file, "seed/y/etcdkit", "")
	if err := file.Put(ctx, "seed/README.txt", strings.NewReader("not a backup")); err != nil {
		t.Fatal(err)
	}
	// shoot--c has written nothing for three days.
	old := time.Now().Add(-72 * time.Hour)
	if err := filepath.Walk(filepath.Join(dir, "seed", "shoot--c"), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	}); err != nil {
		t.Fatal(err)
	}

	f, err := fleet.Scan(ctx, bucket, fleet.ScanOptions{PricePerGiBMonth: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Clusters) != 5 || bucket.lists.Load() != 1 || bucket.gets.Load() > 2*5 {
		t.Fatalf("scan: %d prefixes with %d lists and %d reads: %+v", len(f.Clusters), bucket.lists.Load(), bucket.gets.Load(), f.Clusters)
	}
	for i, want := range []string{"seed/shoot--a/etcd-main", "seed/shoot--b/etcd-main", "seed/shoot--c/etcd-main", "seed/y", "seed/y/etcdkit"} {
		cl := f.Clusters[i]
		if cl.Prefix != want || cl.Layout != fleet.LayoutEtcdkit || cl.ClusterID == "" || cl.ChainDeltas != 1 || cl.NewestDelta == "" ||
			cl.Drill == nil || cl.Drill.Source != snapshot.DrillBySidecar || cl.Problem != "" || cl.Stale != (i == 2) || cl.Bytes == 0 || cl.MonthlyCost <= 0 || cl.Objects != 4 {
			t.Fatalf("prefix %d: %+v", i, cl)
		}
	}

	for i, want := range []snapshot.DrillResult{snapshot.DrillOK, snapshot.DrillMismatch} {
		st, err := store.WithPrefix(file, f.Clusters[i].Prefix)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := farDrill(ctx, st, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Result != want || !rec.Compared || rec.Source != snapshot.DrillByFleet {
			t.Fatalf("fleet drill of %s: %+v, want %s", f.Clusters[i].Prefix, rec, want)
		}
		t.Logf("fleet drill of %s: %s %s", f.Clusters[i].Prefix, rec.Result, rec.Error)
	}
	// A prefix whose sidecar recorded no digest: the latest chain
	// replays, uncompared.
	if err := a.Delete(ctx, f.Clusters[0].Drill.Key); err != nil {
		t.Fatal(err)
	}
	// (the fleet drill's own record stays; it is no sidecar's)
	rec, err := farDrill(ctx, a, t.TempDir())
	if err != nil || rec.Result != snapshot.DrillOK || rec.Compared {
		t.Fatalf("a drill without a recorded digest: %+v, %v", rec, err)
	}

	// A drill's record keeps no silent cluster alive.
	c3, err := store.WithPrefix(file, "seed/shoot--c/etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := farDrill(ctx, c3, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	// Backups that lost the newest delta a sidecar verified fail.
	cat, err := snapshot.List(ctx, y)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := cat.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Delete(ctx, latest.Deltas[len(latest.Deltas)-1].Key); err != nil {
		t.Fatal(err)
	}
	if rec, err := farDrill(ctx, y, t.TempDir()); err != nil || rec.Result != snapshot.DrillFailed ||
		!strings.Contains(rec.Error, "backups were lost") {
		t.Fatalf("a drill of backups short of the verified revision: %+v, %v", rec, err)
	}

	e := fleet.NewExporter(bucket, fleet.ScanOptions{}, time.Hour)
	if _, err := e.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			got[fam.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	for name, want := range map[string]float64{
		"etcdkit_fleet_prefixes{}":                                                                5,
		"etcdkit_fleet_stale{prefix=seed/shoot--c/etcd-main}":                                     1,
		"etcdkit_fleet_stale{prefix=seed/shoot--a/etcd-main}":                                     0,
		"etcdkit_fleet_chain_deltas{prefix=seed/shoot--b/etcd-main}":                              1,
		"etcdkit_fleet_drill_result{prefix=seed/shoot--b/etcd-main,result=mismatch,source=fleet}": 1,
		"etcdkit_fleet_drill_result{prefix=seed/shoot--a/etcd-main,result=ok,source=fleet}":       1,
		"etcdkit_fleet_drill_result{prefix=seed/y,result=failed,source=fleet}":                    1,
		"etcdkit_fleet_scans_total{}":                                                             1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	if got["etcdkit_fleet_rpo_seconds{prefix=seed/shoot--a/etcd-main}"] <= 0 {
		t.Errorf("no RPO for shoot--a: %v", got)
	}
}

func TestSampleIsTheDays(t *testing.T) {
	var prefixes []string
	for i := range 100 {
		prefixes = append(prefixes, fmt.Sprintf("p%03d", i))
	}
	day := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	a, b := fleet.Sample(prefixes, 10, day), fleet.Sample(prefixes[50:], 10, day)
	if fmt.Sprint(a) != fmt.Sprint(fleet.Sample(prefixes, 10, day.Add(20*time.Hour))) {
		t.Fatal("two callers on the same day picked other prefixes")
	}
	if fmt.Sprint(a) == fmt.Sprint(fleet.Sample(prefixes, 10, day.Add(24*time.Hour))) || len(a) != 10 || len(b) != 10 {
		t.Fatalf("samples: %v, %v", a, b)
	}
	if got := fleet.Sample(prefixes[:3], 10, day); len(got) != 3 {
		t.Fatalf("a sample larger than the fleet: %v", got)
	}
}

// deploy/monitoring/fleet-metrics.txt lists the exporter's metrics, which
// the alerting rules there may name.
func TestMetricsListIsTheExporters(t *testing.T) {
	metricslist.Check(t, "../deploy/monitoring/fleet-metrics.txt", fleet.NewExporter(nil, fleet.ScanOptions{}, 0).Describe,
		"go test -run TestMetricsListIsTheExporters ./fleet")
}

// farDrill is the fleet's drill of one prefix: its record.
func farDrill(ctx context.Context, st store.Store, work string) (snapshot.DrillRecord, error) {
	out, err := drill.Far(ctx, st, drill.Options{WorkDir: work})
	return out.Record, err
}
