// Package metricslist holds the lists of metric names in deploy/monitoring
// to what a collector describes: the alerting rules and dashboards there
// may name only listed metrics, and a test of each exporting package calls
// Check. It owns no metric.
package metricslist

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var descName = regexp.MustCompile(`fqName: "(etcdkit_[a-z_]+)"`)

// Check fails t unless file lists the etcdkit_ metrics describe sends, one
// a line, sorted. With UPDATE_METRICS set it writes the list first; rerun
// is the command that does, for the failure's message.
func Check(t testing.TB, file string, describe func(chan<- *prometheus.Desc), rerun string) {
	t.Helper()
	ch := make(chan *prometheus.Desc, 64)
	go func() { describe(ch); close(ch) }()
	var names []string
	for d := range ch {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	want := strings.Join(names, "\n") + "\n"
	if os.Getenv("UPDATE_METRICS") != "" {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not the metrics exported; run UPDATE_METRICS=1 %s\nwant:\n%s", file, rerun, want)
	}
}
