package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr"
)

// manifests are the files kubectl applies.
func manifests(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("manifests %v: %v", files, err)
	}
	return files
}

// Every manifest is what the API server accepts: applied with
// --dry-run=server, every object is validated against its API, strictly
// (an unknown field fails), and a warning fails too. A typo shows that
// the check bites.
func TestManifestsApply(t *testing.T) {
	etcd := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	sec := etcd.Security
	api := emulator.RequireKube(t, emulator.KubeOptions{Etcd: etcd.Endpoints(), EtcdCA: sec.CA.File,
		EtcdCert: sec.Client.CertFile, EtcdKey: sec.Client.KeyFile}).Kube
	if out, err := api.Kubectl(t.Context(), nil, "create", "namespace", "etcd"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, file := range manifests(t) {
		args := []string{"apply", "--dry-run=server", "--warnings-as-errors", "--namespace=etcd", "-f", file}
		if file == "etcd-druid.yaml" {
			// etcd-druid names the sidecar's port "server", as the etcd
			// container's peer port: the API server warns of its pods so,
			// and must warn of nothing else here.
			_, err := api.Kubectl(t.Context(), nil, args...)
			if err == nil || !strings.Contains(err.Error(), `duplicate port name "server"`) {
				t.Errorf("%s: the API server does not warn of etcd-druid's port names: %v", file, err)
			}
			for line := range strings.SplitSeq(fmt.Sprint(err), "\n") {
				if strings.Contains(line, "Warning") && !strings.Contains(line, `duplicate port name "server"`) {
					t.Errorf("%s: %s", file, line)
				}
			}
			args = slices.Delete(args, 2, 3)
		}
		out, err := api.Kubectl(t.Context(), nil, args...)
		if err != nil {
			t.Errorf("%s: %v\n%s", file, err, out)
			continue
		}
		applied := strings.Count(string(out), "(server dry run)")
		if objs := len(load(t, file)); applied != objs {
			t.Errorf("%s: %d objects, %d applied:\n%s", file, objs, applied, out)
		}
	}
	b, err := os.ReadFile("etcd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(string(b), "podManagementPolicy:", "podManagmentPolicy:", 1)
	out, err := api.Kubectl(t.Context(), []byte(typo), "apply", "--dry-run=server", "--namespace=etcd", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "podManagmentPolicy") {
		t.Fatalf("a misspelt field was accepted: %v\n%s", err, out)
	}
}

// rbac.yaml grants the sidecars the leases and nothing else, and the
// StatefulSet runs its sidecars as that service account, with the flags
// and environment of the leases.
func TestRBACManifest(t *testing.T) {
	rbac := load(t, "rbac.yaml")
	role := rbac["Role/etcd-leases"]
	rules := list(role.get("rules"))
	if len(rules) != 1 {
		t.Fatalf("the Role has %d rules, want one on leases", len(rules))
	}
	var verbs []string
	for _, v := range rules[0].get("verbs").([]any) {
		verbs = append(verbs, v.(string))
	}
	slices.Sort(verbs)
	if g := rules[0].get("apiGroups").([]any); len(g) != 1 || g[0] != "coordination.k8s.io" ||
		!slices.Equal(verbs, []string{"create", "get", "update"}) {
		t.Fatalf("the Role grants %v on %v, want get, create and update on leases", verbs, g)
	}
	binding := rbac["RoleBinding/etcd-leases"]
	subjects := list(binding.get("subjects"))
	if binding.str("roleRef", "name") != "etcd-leases" || len(subjects) != 1 || subjects[0].str("name") != "etcd" ||
		rbac["ServiceAccount/etcd"] == nil {
		t.Fatalf("the RoleBinding does not bind etcd-leases to the service account etcd: %v", binding)
	}
	spec := object(load(t, "etcd.yaml")["StatefulSet/etcd"].get("spec", "template", "spec").(map[string]any))
	if spec.str("serviceAccountName") != "etcd" {
		t.Fatalf("the pods run as %q", spec.str("serviceAccountName"))
	}
	for _, c := range list(spec.get("containers")) {
		if c.str("name") != "backup" {
			continue
		}
		args := strings.Join(strs(c.get("args")), " ")
		for _, flag := range []string{"--enable-member-lease-renewal=true", "--enable-snapshot-lease-renewal=true"} {
			if !strings.Contains(args, flag) {
				t.Errorf("the sidecar runs without %s", flag)
			}
		}
		if env := envOf(c); env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
			t.Errorf("the sidecar's environment names no pod or namespace: %v", env)
		}
	}
}

// The etcd-druid-style StatefulSet is what etcd-druid's builder makes and
// what etcd-backup server takes: the backup-restore container's
// arguments parse as server's, every pod's member is in the mounted
// etcd.conf.yaml, the leases its flags name exist, and its Role lets it
// update them.
func TestDruidManifest(t *testing.T) {
	objs := load(t, "etcd-druid.yaml")
	sts := objs["StatefulSet/etcd-main"]
	spec := object(sts.get("spec", "template", "spec").(map[string]any))
	var br object
	for _, c := range list(spec.get("containers")) {
		if c.str("name") == "backup-restore" {
			br = c
		}
	}
	if br == nil || !strings.HasPrefix(br.str("image"), "ghcr.io/etcdkit/etcd-backup:") {
		t.Fatalf("no backup-restore container of the etcd-backup image: %v", br)
	}
	args := strs(br.get("args"))
	if args[0] != "server" {
		t.Fatalf("backup-restore runs %v", args)
	}
	bins := buildBinaries(t)
	if out, err := exec.Command(bins["etcd-backup"], append(args, "--help")...).CombinedOutput(); err != nil || strings.Contains(string(out), "unknown flag") {
		t.Fatalf("etcd-druid's arguments do not parse as server's: %v\n%s", err, out)
	}
	env := envOf(br)
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("backup-restore's environment: %v", env)
	}
	// The configuration, where etcdbr reads it.
	conf := ""
	for _, m := range list(br.get("volumeMounts")) {
		if m.str("name") == "etcd-config-file" {
			conf = filepath.Join(m.str("mountPath"), "etcd.conf.yaml")
		}
	}
	if conf != etcdbr.DefaultEtcdConf {
		t.Fatalf("the configuration is mounted at %q, etcd-backup server reads %s", conf, etcdbr.DefaultEtcdConf)
	}
	file := filepath.Join(t.TempDir(), "etcd.conf.yaml")
	if err := os.WriteFile(file, []byte(objs["ConfigMap/etcd-main-config"].str("data", "etcd.conf.yaml")), 0o600); err != nil {
		t.Fatal(err)
	}
	ec, err := etcdbr.LoadEtcdConf(file)
	if err != nil {
		t.Fatal(err)
	}
	replicas, _ := sts.get("spec", "replicas").(float64)
	leases := []string{flagValue(args, "full-snapshot-lease-name"), flagValue(args, "delta-snapshot-lease-name")}
	for i := range int(replicas) {
		pod := "etcd-main-" + string(rune('0'+i))
		m, err := ec.Member(pod)
		if err != nil {
			t.Fatalf("pod %s: %v", pod, err)
		}
		leases = append(leases, m.Name)
	}
	for _, l := range leases {
		if objs["Lease/"+l] == nil {
			t.Errorf("no Lease %s, which the sidecar renews", l)
		}
	}
	var rules []string
	for _, r := range list(objs["Role/druid.gardener.cloud:etcd:etcd-main"].get("rules")) {
		if slices.Contains(strs(r.get("resources")), "leases") {
			rules = strs(r.get("verbs"))
		}
	}
	if !slices.Contains(rules, "get") || !slices.Contains(rules, "update") {
		t.Errorf("etcd-druid's Role grants %v on leases: the sidecar needs get and update", rules)
	}
}

func strs(v any) []string {
	var out []string
	items, _ := v.([]any)
	for _, it := range items {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

// envOf maps a container's environment to the field path or value of
// each variable.
func envOf(c object) map[string]string {
	env := map[string]string{}
	for _, e := range list(c.get("env")) {
		v := e.str("value")
		if p := e.str("valueFrom", "fieldRef", "fieldPath"); p != "" {
			v = p
		}
		env[e.str("name")] = v
	}
	return env
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// etcd-druid.yaml is what etcd-druid's builders write, as recorded in
// testdata from gardener/etcd-druid 5b90b4a7: the pod template whole
// (every arg of both containers, env, ports, probes, resources, security
// contexts, mounts, volumes) with etcdkit's images in place of its own,
// the etcd configuration key for key and in its encoder's order, the
// ConfigMap checksum that rolls the pods, every object's labels, the
// selectors and the PDB.
func TestDruidBuilderFacts(t *testing.T) {
	var facts struct {
		PodTemplate     map[string]any               `json:"podTemplate"`
		EtcdConfig      map[string]any               `json:"etcdConfig"`
		Labels          map[string]map[string]string `json:"labels"`
		DefaultLabels   map[string]string            `json:"defaultLabels"`
		PDBMinAvailable float64                      `json:"pdbMinAvailable"`
		Jobs            map[string]struct {
			Labels    map[string]string `json:"labels"`
			Spec, Pod map[string]any
			Container map[string]any `json:"container"`
			Volumes   []any          `json:"volumes"`
		} `json:"jobs"`
	}
	b, err := os.ReadFile("testdata/etcd-druid-5b90b4a7.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &facts); err != nil {
		t.Fatal(err)
	}
	objs := load(t, "etcd-druid.yaml")
	if len(objs) != len(facts.Labels) {
		t.Errorf("etcd-druid.yaml holds %d objects, etcd-druid makes %d", len(objs), len(facts.Labels))
	}
	for key, want := range facts.Labels {
		o := objs[key]
		if o == nil {
			t.Errorf("etcd-druid.yaml lacks %s", key)
			continue
		}
		labels := map[string]string{}
		for k, v := range want {
			labels["app.kubernetes.io/"+k] = v
		}
		maps.Copy(labels, facts.DefaultLabels)
		if got := stringMap(o.get("metadata", "labels")); !maps.Equal(got, labels) {
			t.Errorf("%s's labels: %v, etcd-druid's %v", key, got, labels)
		}
	}

	sts := objs["StatefulSet/etcd-main"]
	tmpl := sts.get("spec", "template").(map[string]any)
	images := map[string]string{
		"europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.6.2": "ghcr.io/etcdkit/etcd-wrapper:latest",
		"europe-docker.pkg.dev/gardener-project/public/gardener/etcdbrctl:v0.41.2":   "ghcr.io/etcdkit/etcd-backup:latest",
	}
	for _, c := range list(object(facts.PodTemplate).get("spec", "containers")) {
		c["image"] = images[c.str("image")]
	}
	for _, path := range [][]string{{"metadata"}, {"spec", "securityContext"}, {"spec", "hostAliases"}, {"spec", "volumes"},
		{"spec", "serviceAccountName"}, {"spec", "shareProcessNamespace"}} {
		if got, want := object(tmpl).get(path...), object(facts.PodTemplate).get(path...); !reflect.DeepEqual(got, want) {
			t.Errorf("the pod template's %s:\n%v\netcd-druid's:\n%v", strings.Join(path, "."), got, want)
		}
	}
	got, want := list(object(tmpl).get("spec", "containers")), list(object(facts.PodTemplate).get("spec", "containers"))
	if len(got) != len(want) {
		t.Fatalf("%d containers, etcd-druid's %d", len(got), len(want))
	}
	for i := range want {
		for k := range mergedKeys(got[i], want[i]) {
			if !reflect.DeepEqual(got[i][k], want[i][k]) {
				t.Errorf("container %s's %s:\n%v\netcd-druid's:\n%v", want[i].str("name"), k, got[i][k], want[i][k])
			}
		}
	}
	for _, key := range []string{"Service/etcd-main-peer", "Service/etcd-main-client"} {
		sel := stringMap(objs[key].get("spec", "selector"))
		if wantSel := maps.Clone(facts.DefaultLabels); !maps.Equal(sel, func() map[string]string {
			wantSel["app.kubernetes.io/component"] = "etcd-statefulset"
			return wantSel
		}()) {
			t.Errorf("%s selects %v", key, sel)
		}
	}
	if sel := stringMap(sts.get("spec", "selector", "matchLabels")); !maps.Equal(sel, facts.DefaultLabels) {
		t.Errorf("the StatefulSet selects %v", sel)
	}
	pdb := objs["PodDisruptionBudget/etcd-main"]
	if sel := stringMap(pdb.get("spec", "selector", "matchLabels")); !maps.Equal(sel, facts.DefaultLabels) || pdb.get("spec", "minAvailable") != facts.PDBMinAvailable {
		t.Errorf("the PDB: %v", pdb)
	}

	// The Jobs etcd-druid starts beside the cluster.
	jobs := load(t, "etcd-druid-jobs.yaml")
	if len(jobs) != len(facts.Jobs) {
		t.Errorf("etcd-druid-jobs.yaml holds %d objects, etcd-druid makes %d Jobs", len(jobs), len(facts.Jobs))
	}
	for key, want := range facts.Jobs {
		j := jobs[key]
		if j == nil {
			t.Errorf("etcd-druid-jobs.yaml lacks %s", key)
			continue
		}
		pod := object(j.get("spec", "template", "spec").(map[string]any))
		if got := stringMap(j.get("metadata", "labels")); !maps.Equal(got, want.Labels) || !maps.Equal(stringMap(j.get("spec", "template", "metadata", "labels")), want.Labels) {
			t.Errorf("%s's labels: %v, etcd-druid's %v", key, got, want.Labels)
		}
		for k, v := range want.Spec {
			if got := j.get("spec", k); !reflect.DeepEqual(got, v) {
				t.Errorf("%s's spec.%s: %v, etcd-druid's %v", key, k, got, v)
			}
		}
		for k, v := range want.Pod {
			if got := pod.get(k); !reflect.DeepEqual(got, v) {
				t.Errorf("%s's pod %s: %v, etcd-druid's %v", key, k, got, v)
			}
		}
		cs := list(pod.get("containers"))
		if len(cs) != 1 || !strings.HasPrefix(cs[0].str("image"), "ghcr.io/etcdkit/etcd-backup:") {
			t.Fatalf("%s's containers: %v", key, cs)
		}
		c := maps.Clone(cs[0])
		delete(c, "image")
		delete(c, "imagePullPolicy")
		if !reflect.DeepEqual(map[string]any(c), want.Container) {
			t.Errorf("%s's container:\n%v\netcd-druid's:\n%v", key, c, want.Container)
		}
		if !reflect.DeepEqual(pod.get("volumes"), any(want.Volumes)) {
			t.Errorf("%s's volumes: %v, etcd-druid's %v", key, pod.get("volumes"), want.Volumes)
		}
	}

	// The configuration: etcd-druid's keys and values, in the order its
	// YAML encoder writes them, and the checksum of its data.
	conf := objs["ConfigMap/etcd-main-config"].str("data", "etcd.conf.yaml")
	parsed := map[string]any{}
	if err := yaml.Unmarshal([]byte(conf), &parsed); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(parsed, facts.EtcdConfig) {
		t.Errorf("etcd.conf.yaml:\n%v\netcd-druid's:\n%v", parsed, facts.EtcdConfig)
	}
	j, err := yaml.YAMLToJSON([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	if canon, err := yaml.JSONToYAML(j); err != nil || string(canon) != conf {
		t.Errorf("etcd.conf.yaml is not in etcd-druid's encoding:\n%s\nwant:\n%s", conf, canon)
	}
	data, err := json.Marshal(map[string]string{"etcd.conf.yaml": conf})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got := object(tmpl).str("metadata", "annotations", "checksum/etcd-configmap"); got != hex.EncodeToString(sum[:]) {
		t.Errorf("the pod template's checksum/etcd-configmap is %s, the ConfigMap's %x", got, sum)
	}
}

func stringMap(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, v := range m {
		out[k], _ = v.(string)
	}
	return out
}

func mergedKeys(a, b object) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}
