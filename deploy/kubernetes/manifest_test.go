package kubernetes

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/internal/gobuild"
	"github.com/etcdkit/etcdkit/wrapper"
)

// object is a manifest document, read loosely.
type object map[string]any

func (o object) get(path ...string) any {
	var v any = map[string]any(o)
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func (o object) str(path ...string) string { s, _ := o.get(path...).(string); return s }

func list(v any) []object {
	var out []object
	items, _ := v.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// load reads a manifest's objects by kind/name.
func load(t *testing.T, file string) map[string]object {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]object{}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		// The separator takes the document's last newline with it.
		doc = append(doc, '\n')
		var o object
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			t.Fatalf("a document of %s: %v", file, err)
		}
		key := o.str("kind") + "/" + o.str("metadata", "name")
		byKind[key] = o
	}
	return byKind
}

// The manifests hang together: the etcd configuration loads strictly for
// each pod, every container's flags parse in its binary, the probes hit
// the ports the binaries listen on, and every mount and secret key exists.
func TestManifests(t *testing.T) {
	objs := load(t, "etcd.yaml")
	var etcdFiles []string
	for _, k := range []string{"ConfigMap/etcd-config", "Secret/etcd-backup", "Secret/etcd-tls", "Service/etcd", "Service/etcd-client", "StatefulSet/etcd"} {
		if objs[k] == nil {
			t.Fatalf("no %s in etcd.yaml", k)
		}
	}
	sts := objs["StatefulSet/etcd"]
	replicas, _ := sts.get("spec", "replicas").(float64)
	etcdYAML := objs["ConfigMap/etcd-config"].str("data", "etcd.yaml")
	cfgFile := filepath.Join(t.TempDir(), "etcd.yaml")
	if err := os.WriteFile(cfgFile, []byte(etcdYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range int(replicas) {
		pod := "etcd-" + string(rune('0'+i))
		t.Setenv("POD_NAME", pod)
		cfg, err := wrapper.LoadConfig(cfgFile)
		if err != nil {
			t.Fatalf("pod %s: %v", pod, err)
		}
		if cfg.Name != pod || !strings.Contains(cfg.InitialCluster, pod+"=https://"+pod+".etcd:2380") {
			t.Fatalf("pod %s: name %q, initial cluster %q", pod, cfg.Name, cfg.InitialCluster)
		}
		conn := wrapper.ClientConn(cfg)
		etcdFiles = []string{cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile, cfg.ClientTLSInfo.TrustedCAFile,
			cfg.PeerTLSInfo.CertFile, cfg.PeerTLSInfo.KeyFile, cfg.PeerTLSInfo.TrustedCAFile, conn.TLS.CA, conn.TLS.Cert, conn.TLS.Key}
		if !cfg.ClientTLSInfo.ClientCertAuth || !cfg.PeerTLSInfo.ClientCertAuth || conn.TLS.CA == "" || conn.TLS.Cert == "" {
			t.Fatalf("pod %s: etcd does not require client certificates, or the wrapper has none: %+v", pod, conn.TLS)
		}
	}

	bins := buildBinaries(t)
	t.Run("fleet.yaml", func(t *testing.T) { fleetManifest(t, bins["etcd-backup"]) })
	spec := object(sts.get("spec", "template", "spec").(map[string]any))
	if links, ok := spec.get("enableServiceLinks").(bool); !ok || links {
		t.Error("the pods get service links: set enableServiceLinks: false")
	}
	volumes := map[string]object{}
	for _, v := range list(spec.get("volumes")) {
		volumes[v.str("name")] = v
	}
	for _, v := range volumes {
		secret := objs["Secret/"+v.str("secret", "secretName")]
		if v.get("secret") != nil && secret == nil {
			t.Errorf("volume %s mounts a secret the manifest lacks", v.str("name"))
		}
		for _, item := range list(v.get("secret", "items")) {
			if secret.get("stringData", item.str("key")) == nil {
				t.Errorf("volume %s uses key %s the secret lacks", v.str("name"), item.str("key"))
			}
		}
	}
	claims := map[string]bool{}
	for _, c := range list(sts.get("spec", "volumeClaimTemplates")) {
		claims[c.str("metadata", "name")] = true
	}
	containers := list(spec.get("containers"))
	if len(containers) != 2 {
		t.Fatalf("%d containers, want the wrapper and the sidecar", len(containers))
	}
	for _, c := range containers {
		var args []string
		for _, a := range c.get("args").([]any) {
			args = append(args, a.(string))
		}
		bin := bins["etcd-wrapper"]
		if c.str("name") == "backup" {
			bin = bins["etcd-backup"]
		}
		// --help after the flags: the binary parses them all first.
		if out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput(); err != nil {
			t.Errorf("container %s: its flags do not parse: %v\n%s", c.str("name"), err, out)
		}
		listen := ""
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--listen="); ok {
				listen = v[strings.LastIndex(v, ":")+1:]
			}
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
			if c.get(probe) == nil {
				continue
			}
			port, _ := c.get(probe, "httpGet", "port").(float64)
			path := c.str(probe, "httpGet", "path")
			if listen == "" || strconv.Itoa(int(port)) != listen {
				t.Errorf("container %s: %s on port %v, the binary listens on %q", c.str("name"), probe, port, listen)
			}
			if !slices.Contains([]string{"/livez", "/readyz", "/healthz"}, path) {
				t.Errorf("container %s: %s probes %s", c.str("name"), probe, path)
			}
		}
		for _, m := range list(c.get("volumeMounts")) {
			if volumes[m.str("name")] == nil && !claims[m.str("name")] {
				t.Errorf("container %s mounts %s, which is not declared", c.str("name"), m.str("name"))
			}
		}
		// Every certificate file a flag or etcd's configuration names is in
		// a secret the container mounts.
		files := etcdFiles
		if c.str("name") == "backup" {
			files = nil
			for _, a := range args {
				if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, "/etc/") && !strings.Contains(a, "token") && !strings.Contains(a, "credentials") {
					files = append(files, v)
				}
			}
		}
		for _, f := range files {
			if !mounted(f, c, volumes, objs) {
				t.Errorf("container %s: %s is in no secret it mounts", c.str("name"), f)
			}
		}
	}
}

// mounted says whether path is a key of a secret that the container mounts
// at path's directory.
func mounted(path string, c object, volumes map[string]object, objs map[string]object) bool {
	for _, m := range list(c.get("volumeMounts")) {
		v := volumes[m.str("name")]
		if v == nil || filepath.Dir(path) != m.str("mountPath") {
			continue
		}
		if secret := objs["Secret/"+v.str("secret", "secretName")]; secret != nil && secret.get("stringData", filepath.Base(path)) != nil {
			return true
		}
	}
	return false
}

func buildBinaries(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for _, name := range []string{"etcd-wrapper", "etcd-backup"} {
		bin := filepath.Join(dir, name)
		if err := gobuild.Build(t.Context(), bin, "../../cmd/"+name); err != nil {
			t.Fatal(err)
		}
		out[name] = bin
	}
	return out
}
