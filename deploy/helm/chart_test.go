package helm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/gobuild"
)

const chart = "etcdkit"

// valueSets are the values files of testdata: each is linted, rendered and
// applied.
func valueSets(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("values files %v: %v", files, err)
	}
	return files
}

// helm runs the pinned helm and returns what it printed.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, emulator.RequireProgram(t, emulator.Helm), args...)
	// No repository, cache or plugin of the user's.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// render is what the chart renders with a values file, and --set values.
func render(t *testing.T, values string, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", "backup", chart, "--namespace", "etcd", "-f", values}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return helm(t, args...)
}

// The chart lints clean (--strict) with each values file.
func TestChartLints(t *testing.T) {
	for _, values := range valueSets(t) {
		if out, err := helm(t, "lint", "--strict", chart, "-f", values); err != nil {
			t.Errorf("%s: %v\n%s", values, err, out)
		}
	}
}

// Values the chart cannot run with are refused with what to give: by the
// schema (a misspelt key, a value outside its set) or by the templates (what
// is required for a mode).
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"stor.url=s3://b/p"}, "stor"},
		{[]string{"mode=cluster"}, "mode"},
		{[]string{"schedule.fullFrom=leader"}, "fullFrom"},
		{[]string{"schedule.deltaPeriod=20"}, "deltaPeriod"},
		{[]string{"store.url="}, "store.url: give the store"},
		{[]string{"store.url=ftp://host/x"}, "/store/url"},
		{[]string{"etcd.endpoints=null"}, "etcd.endpoints: give the client URLs"},
		{[]string{"etcd.tls.hostPKI.enabled=true"}, "read in mode node only"},
		{[]string{"store.url=file:///backups", "store.credentials.secretName=x"}, "store.credentials.variable"},
		{[]string{"etcd.auth.passwordSecret="}, "etcd.auth.passwordSecret"},
		{[]string{"encryption.recipients[0]=AGE-SECRET-KEY-1X"}, "recipients"},
		{[]string{"mode=node", "etcd.tls.secretName="}, "kubeadm's etcd takes clients with certificates only"},
		{[]string{"mode=node", "api.port=2380"}, "/api/port"},
		{[]string{"api.port=80"}, "/api/port"},
		{[]string{"workDir.sizeLimit=0"}, "/workDir/sizeLimit"},
		{[]string{"workDir.sizeLimit=0Gi"}, "/workDir/sizeLimit"},
		{[]string{"workDir.sizeLimit=ten"}, "/workDir/sizeLimit"},
	} {
		out, err := render(t, "testdata/external.yaml", c.set...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("--set %v: want a refusal naming %q, got %v:\n%.600s", c.set, c.want, err, out)
		}
	}
}

// objects splits rendered manifests into objects, by kind/name.
func objects(t *testing.T, manifests string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if o == nil {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		out[o["kind"].(string)+"/"+meta["name"].(string)] = o
	}
	return out
}

func dig(o any, path ...string) any {
	for _, p := range path {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[p]
	}
	return o
}

func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// What the chart renders runs: the container's arguments parse as etcd-backup
// serve's flags, the probes reach the port it listens on, every file a flag
// names is on a volume the container mounts, and the workload is the mode's.
func TestChartRenders(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "etcd-backup")
	if err := gobuild.Build(t.Context(), bin, "../../cmd/etcd-backup"); err != nil {
		t.Fatal(err)
	}
	for _, values := range valueSets(t) {
		out, err := render(t, values)
		if err != nil {
			t.Fatalf("%s: %v\n%s", values, err, out)
		}
		checkRendered(t, bin, values, out)
	}
	// A release name as long as helm takes: the cluster name the backup
	// objects carry stays one etcd-backup takes.
	out, err := helm(t, "template", strings.Repeat("r", 53), chart, "--namespace", "etcd", "-f", "testdata/external.yaml")
	if err != nil {
		t.Fatalf("a long release name: %v\n%s", err, out)
	}
	checkRendered(t, bin, "a long release name", out)
}

// checkRendered checks the workload of what values rendered against the
// binary bin.
func checkRendered(t *testing.T, bin, values, out string) {
	t.Helper()
	objs := objects(t, out)
	node := strings.Contains(values, "node") || strings.Contains(values, "file")
	kind := map[bool]string{true: "DaemonSet", false: "Deployment"}[node]
	var w map[string]any
	for name, o := range objs {
		if strings.HasPrefix(name, kind+"/") {
			w = o
		}
	}
	if w == nil {
		t.Fatalf("%s: no %s among %d objects", values, kind, len(objs))
	}
	spec := dig(w, "spec", "template", "spec").(map[string]any)
	if node != (spec["hostNetwork"] == true) {
		t.Errorf("%s: hostNetwork %v", values, spec["hostNetwork"])
	}
	c := spec["containers"].([]any)[0]
	args := strs(dig(c, "args"))
	if out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput(); err != nil {
		t.Errorf("%s: the arguments do not parse as serve's: %v\n%s", values, err, out)
	}
	outside := slices.Contains(args, "--from-outside")
	if outside == node || node != slices.Contains(args, "--member-endpoint=https://127.0.0.1:2379") {
		t.Errorf("%s: mode and arguments disagree: %v", values, args)
	}
	listen := ""
	mounts := map[string]bool{}
	for _, a := range args {
		// etcd-backup checks this name only when it runs.
		if name, ok := strings.CutPrefix(a, "--backup-objects="); ok && !regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`).MatchString(name) {
			t.Errorf("%s: %s is no name etcd-backup takes", values, a)
		}
	}
	for _, m := range dig(c, "volumeMounts").([]any) {
		mounts[dig(m, "mountPath").(string)] = true
	}
	for _, a := range args {
		flag, v, _ := strings.Cut(a, "=")
		if flag == "--listen" {
			listen = v[strings.LastIndex(v, ":")+1:]
		}
		if strings.HasPrefix(v, "/") && !mounts[filepath.Dir(v)] && !mounts[v] {
			t.Errorf("%s: %s names a file on no volume the container mounts", values, a)
		}
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		port := dig(c, probe, "httpGet", "port")
		ports := dig(c, "ports").([]any)
		if port != "api" || strconv.Itoa(int(dig(ports[0], "containerPort").(float64))) != listen {
			t.Errorf("%s: %s on %v, the binary listens on %s", values, probe, port, listen)
		}
	}
}

// monitoringCRDs stand in for the Prometheus Operator's, which no registry
// this project reaches serves: they take any ServiceMonitor and
// PrometheusRule, so the dry run checks the rest of each object.
const monitoringCRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, plural: servicemonitors}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: prometheusrules.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: PrometheusRule, plural: prometheusrules}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// What the chart renders is what the API server accepts: its CRDs applied,
// every object of each values file applied with --dry-run=server, strictly
// (an unknown field fails), with warnings as errors.
func TestChartAppliesOnTheAPIServer(t *testing.T) {
	etcd := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	sec := etcd.Security
	api := emulator.RequireKube(t, emulator.KubeOptions{Etcd: etcd.Endpoints(), EtcdCA: sec.CA.File,
		EtcdCert: sec.Client.CertFile, EtcdKey: sec.Client.KeyFile}).Kube
	kubectl := func(stdin []byte, args ...string) string {
		t.Helper()
		out, err := api.Kubectl(t.Context(), stdin, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return string(out)
	}
	kubectl(nil, "create", "namespace", "etcd")
	kubectl([]byte(monitoringCRDs), "apply", "-f", "-")
	kubectl(nil, "apply", "--warnings-as-errors", "-f", filepath.Join(chart, "crds"))
	kubectl(nil, "wait", "--for=condition=established", "--timeout=60s", "crd/etcdsnapshots.backup.etcdkit.io",
		"crd/etcdbackups.backup.etcdkit.io", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
	for _, values := range valueSets(t) {
		out, err := render(t, values)
		if err != nil {
			t.Fatalf("%s: %v\n%s", values, err, out)
		}
		applied := kubectl([]byte(out), "apply", "--dry-run=server", "--warnings-as-errors", "--namespace=etcd", "-f", "-")
		if got, want := strings.Count(applied, "(server dry run)"), len(objects(t, out)); got != want {
			t.Errorf("%s: %d objects, %d applied:\n%s", values, want, got, applied)
		}
	}
}

// The chart carries copies of files the project keeps elsewhere (helm
// reads no file outside the chart): they are the same.
func TestChartCopiesAreTheProjects(t *testing.T) {
	for copied, original := range map[string]string{
		"etcdkit/files/etcdkit-rules.yaml":     "../monitoring/etcdkit-rules.yaml",
		"etcdkit/files/etcdkit-dashboard.json": "../monitoring/etcdkit-dashboard.json",
		"etcdkit/crds/etcdsnapshot-crd.yaml":   "../kubernetes/etcdsnapshot-crd.yaml",
	} {
		a, errA := os.ReadFile(copied)
		b, errB := os.ReadFile(original)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is not %s (%v, %v): cp %s %s", copied, original, errA, errB, original, copied)
		}
	}
}
