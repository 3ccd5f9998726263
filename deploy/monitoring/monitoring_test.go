package monitoring

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// exported are the sidecar's metrics and fleet serve's (metrics.txt and
// fleet-metrics.txt, held to their registries by the sidecar's
// TestMetricsListIsTheRegistrys and fleet's TestMetricsListIsTheExporters).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, file := range []string{"metrics.txt", "fleet-metrics.txt"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for name := range strings.FieldsSeq(string(b)) {
			out[name] = true
		}
	}
	return out
}

// checkExpr parses expr as Prometheus does and fails on any etcdkit
// metric it names that the sidecar does not export.
func checkExpr(t *testing.T, where, expr string, metrics map[string]bool) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q: %v", where, expr, err)
		return
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok || !strings.HasPrefix(vs.Name, "etcdkit_") {
			return nil
		}
		name := vs.Name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, cut := strings.CutSuffix(name, suffix); cut && metrics[base] {
				name = base
			}
		}
		if !metrics[name] {
			t.Errorf("%s: %q names %s, which the sidecar does not export", where, expr, vs.Name)
		}
		return nil
	})
}

// The rules load as Prometheus loads them (unknown fields refused), and
// every alert has a severity and a summary.
func TestRules(t *testing.T) {
	groups, errs := rulefmt.ParseFile("etcdkit-rules.yaml", false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil {
		t.FailNow()
	}
	metrics := exported(t)
	alerts := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			checkExpr(t, r.Alert, r.Expr, metrics)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: no severity or summary", r.Alert)
			}
		}
	}
	// What the rules are for: failed verification, RPO past a threshold,
	// the restore-time budget exceeded; across a fleet, failed drills,
	// stale prefixes and RPO.
	for _, a := range []string{"EtcdkitBackupDiffersFromCluster", "EtcdkitDrillFailing", "EtcdkitRPOTooHigh", "EtcdkitRestoreTimeOverBudget",
		"EtcdkitFleetDrillMismatch", "EtcdkitFleetPrefixStale", "EtcdkitFleetRPOTooHigh"} {
		if !alerts[a] {
			t.Errorf("no alert %s", a)
		}
	}
}

// Every panel of the dashboards (the sidecar's, the fleet's) queries with
// PromQL that parses and names only exported metrics.
func TestDashboard(t *testing.T) {
	for _, file := range []string{"etcdkit-dashboard.json", "etcdkit-fleet-dashboard.json"} {
		t.Run(file, func(t *testing.T) { checkDashboard(t, file) })
	}
}

func checkDashboard(t *testing.T, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard uid %q with %d panels", d.UID, len(d.Panels))
	}
	metrics := exported(t)
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkExpr(t, p.Title, q.Expr, metrics)
		}
	}
}
