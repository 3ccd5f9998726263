package sidecar_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/snapshot"
)

// The uploader's restore drills: the latest chain replayed and found equal
// to the live cluster, with the drill's metrics, the RPO and the restore
// estimate; a budget of restore time compacts the chain.
func TestDrillsAndTheRestoreBudget(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true})
	cli := c.Client(t)
	ctx := context.Background()
	s := newSetup(t)
	sc, err := sidecar.New(sidecar.Options{
		Client: cli, Endpoint: c.Members[0].ClientURL.String(), WorkDir: t.TempDir(),
		Backups: sidecar.BackupOptions{
			Store:       s.st,
			Snapshots:   capture.Options{FullSchedule: "@every 1h", DeltaPeriod: 100 * time.Millisecond, RetentionPeriod: capture.Off},
			DrillPeriod: 300 * time.Millisecond,
			// Any chain with a delta estimates past it: the first delta
			// compacts the chain.
			MaxRestoreTime: time.Millisecond,
		},
		Membership: sidecar.MembershipOptions{Follow: memberFollow},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = sc.Run(rctx) }()
	defer func() { cancel(); <-done }()
	etcdtest.Eventually(t, "uploader", 10*time.Second, sc.Uploader)
	put(t, cli, 50, "/drill/")

	etcdtest.Eventually(t, "the restore budget compacts the chain", 30*time.Second, func() bool {
		cat, err := snapshot.List(ctx, s.st)
		return err == nil && len(cat.Fulls()) >= 2
	})
	etcdtest.Eventually(t, "a drill verifies the chain against the cluster", 30*time.Second, func() bool {
		d := sc.LastDrill()
		return d.Result == "ok" && d.Compared && d.Report.Digest.Revision > 50
	})
	d := sc.LastDrill()
	got := gathered(t, sc)
	for name, want := range map[string]float64{`etcdkit_drill_result{result="ok"}`: 1, `etcdkit_drill_result{result="mismatch"}`: 0,
		`etcdkit_drill_result{result="failed"}`: 0} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	for _, name := range []string{"etcdkit_drill_verified_revision", "etcdkit_restore_estimate_seconds", "etcdkit_drill_last_success_timestamp_seconds",
		"etcdkit_restore_speed_bytes_per_second", "etcdkit_drill_verified_backup_age_seconds"} {
		if got[name] <= 0 {
			t.Errorf("%s = %v, want a positive value", name, got[name])
		}
	}
	if _, ok := got["etcdkit_rpo_seconds"]; !ok {
		t.Error("no etcdkit_rpo_seconds")
	}
	t.Logf("drill: %+v in %v", d.Report.Digest, d.Report.Took)

	// A chain that cannot be restored fails the drill, which the result
	// says. The sidecar is stopped first: its own drills would race.
	cancel()
	<-done
	cat, err := snapshot.List(ctx, s.st)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range cat.Fulls() {
		if err := s.st.Delete(ctx, f.Key); err != nil {
			t.Fatal(err)
		}
	}
	if d := sc.RunDrill(ctx); d.Result != "failed" || d.Err == nil {
		t.Fatalf("a drill without a full snapshot: %+v", d)
	}
	// Every drill is recorded on the store: the last failed, the one
	// before verified the digest against the cluster.
	last, verified, ok, hasVerified, err := snapshot.Drills(ctx, s.st)
	if err != nil || !ok || !hasVerified || last.Result != snapshot.DrillFailed || last.Error == "" ||
		verified.Source != snapshot.DrillBySidecar || verified.SHA256 == "" || verified.Revision < d.Report.Digest.Revision {
		t.Fatalf("drill records: last %+v, verified %+v (%v %v %v)", last, verified, ok, hasVerified, err)
	}
	got = gathered(t, sc)
	if got[`etcdkit_drill_result{result="failed"}`] != 1 || got[`etcdkit_drill_result{result="ok"}`] != 0 {
		t.Fatalf("after a failed drill: %v", got)
	}
}

// gathered is the sidecar's gauges by name{labels}.
func gathered(t *testing.T, sc *sidecar.Sidecar) map[string]float64 {
	t.Helper()
	families, err := sc.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			if g := m.GetGauge(); g != nil {
				out[name] = g.GetValue()
			}
		}
	}
	return out
}
