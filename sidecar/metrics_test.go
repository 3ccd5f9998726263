package sidecar_test

import (
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/metricslist"
	"github.com/etcdkit/etcdkit/sidecar"
)

// metricsFile lists the sidecar's metrics for the monitoring rules and
// dashboard, whose own test checks that they name no other.
const metricsFile = "../deploy/monitoring/metrics.txt"

// The list the monitoring checks against is the registry's, whole.
// UPDATE_METRICS=1 writes it again.
func TestMetricsListIsTheRegistrys(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	s := newSetup(t)
	sc, err := sidecar.New(sidecar.Options{
		Client:   c.Client(t),
		Endpoint: c.Members[0].ClientURL.String(),
		Backups:  sidecar.BackupOptions{Store: s.st, WriteOncePeriod: time.Hour},
		WorkDir:  t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	metricslist.Check(t, metricsFile, sc.Registry().Describe, "go test -run TestMetricsListIsTheRegistrys ./sidecar")
}
