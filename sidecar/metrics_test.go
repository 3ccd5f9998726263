package sidecar_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/sidecar"
)

// metricsFile lists the sidecar's metrics for the monitoring rules and
// dashboard, whose own test checks that they name no other.
const metricsFile = "../deploy/monitoring/metrics.txt"

var descName = regexp.MustCompile(`fqName: "(etcdkit_[a-z_]+)"`)

// The list the monitoring checks against is the registry's, whole.
// UPDATE_METRICS=1 writes it again.
func TestMetricsListIsTheRegistrys(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	s := newSetup(t)
	sc, err := sidecar.New(sidecar.Options{Client: c.Client(t), Endpoint: c.Members[0].ClientURL.String(), Store: s.st, WorkDir: t.TempDir(), WriteOncePeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 256)
	go func() { sc.Registry().Describe(ch); close(ch) }()
	var names []string
	for d := range ch {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	want := strings.Join(names, "\n") + "\n"
	if os.Getenv("UPDATE_METRICS") != "" {
		if err := os.WriteFile(metricsFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(metricsFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not the sidecar's metrics; run UPDATE_METRICS=1 go test -run TestMetricsListIsTheRegistrys ./sidecar\nwant:\n%s", metricsFile, want)
	}
}
