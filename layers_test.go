package etcdkit_test

import (
	"go/build"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/etcdkit/etcdkit"

// layers ranks the packages as ARCHITECTURE.md draws them: a package
// imports only packages of a lower layer. Internal helpers are layer 0;
// binaries, examples, benchmarks and test support are the top, where
// packages of one layer may import each other.
var layers = map[string]int{
	"store": 2, "tlsfiles": 2, "validate": 2, "member": 2, "upgrade": 3,
	"etcdversion": 1, "internal/etcdstorage": 2,
	"store/s3": 3, "store/gcs": 3, "store/azure": 3, "store/swift": 3, "store/all": 4, "etcdclient": 3, "snapshot": 3, "sidecar/api": 3, "sidecar/etcdbr/etcdbrapi": 3,
	"restore": 4, "defrag": 4, "capture": 4,
	"history": 5, "compact": 5, "view": 5, "heartbeat": 5, "startup": 5,
	"tenant": 6, "fleet": 6, "drill": 6,
	"sidecar": 7, "wrapper": 7,
	"sidecar/etcdbr": 8,
	"etcdtest":       top, "examples": top, "internal/chaintest": top, "internal/soak": top, "internal/clouds": top, "validate/internal/withetcd": top, "snapshot/internal/withetcd": top, "internal/database/withbolt": top, "store/storetest": top, "bench": top, "bench/soak": top, "": top,
}

const top = 9

func layerOf(rel string) (int, bool) {
	if l, ok := layers[rel]; ok {
		return l, true
	}
	for _, prefix := range []string{"cmd/", "examples/", "deploy/"} {
		if strings.HasPrefix(rel, prefix) {
			return top, true
		}
	}
	if strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") {
		return 0, true
	}
	return 0, false
}

// No package imports one above it, or one of its own layer below the top.
func TestLayers(t *testing.T) {
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); dir != "." && (name == "tools" || name == "testdata" || strings.HasPrefix(name, ".")) {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			return nil //nolint:nilerr // a directory without Go files
		}
		rel := filepath.ToSlash(dir)
		if rel == "." {
			rel = ""
		}
		own, ok := layerOf(rel)
		if !ok {
			t.Errorf("package %q has no layer: add it to layers and ARCHITECTURE.md", rel)
			return nil
		}
		for _, imp := range pkg.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			l, known := layerOf(dep)
			switch {
			case !known:
				t.Errorf("%s imports %s, which has no layer", rel, dep)
			case l == 0 && own == 0, own == top && l <= top, l < own:
			default:
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", rel, own, dep, l)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// serverEmbedding is etcd's public API for running a member in-process:
// what wrapper, etcdtest and the examples run etcd through.
var serverEmbedding = []string{"go.etcd.io/etcd/server/v3/embed", "go.etcd.io/etcd/server/v3/etcdserver/api/v3client"}

// etcdReference are the harnesses that hold etcdkit to etcd's own code
// and tools (the bench's etcdutl, the soak's reading of a data dir): what
// they check must not go through what is checked.
var etcdReference = []string{"bench", "internal/soak"}

// etcd's server internals (its storage, WAL, raft, etcdutl) are called
// from internal/etcdstorage alone, so a release of etcd that moves them
// changes one package; tests may call them to hold etcdkit to etcd.
func TestServerInternalsConfined(t *testing.T) {
	internal := []string{"go.etcd.io/etcd/server/v3/", "go.etcd.io/etcd/etcdutl/", "go.etcd.io/raft/", "go.etcd.io/etcd/pkg/v3/traceutil"}
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); dir != "." && (name == "tools" || name == "testdata" || strings.HasPrefix(name, ".")) {
			return filepath.SkipDir
		}
		rel := filepath.ToSlash(dir)
		if rel == "internal/etcdstorage" || slices.Contains(etcdReference, rel) {
			return nil
		}
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			return nil //nolint:nilerr // a directory without Go files
		}
		for _, imp := range pkg.Imports {
			if slices.Contains(serverEmbedding, imp) {
				continue
			}
			for _, p := range internal {
				if strings.HasPrefix(imp, p) {
					t.Errorf("%s imports %s: etcd's server internals are internal/etcdstorage's", rel, imp)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// weights are the external modules a package may pull in, directly or
// through the packages it imports, as ARCHITECTURE.md promises embedders:
// only lists every module allowed (empty: the standard library alone);
// never lists module path prefixes it must not reach.
var weights = []struct {
	pkg         string
	only, never []string
}{
	{pkg: "store", only: []string{"golang.org/x/sys"}},
	{pkg: "tlsfiles", only: []string{}},
	{pkg: "etcdversion", only: []string{}},
	{pkg: "sidecar/api", only: []string{}},
	{pkg: "sidecar/etcdbr/etcdbrapi", only: []string{}},
	// A data dir's check reads bbolt, the WAL and snap files itself.
	{pkg: "validate", never: []string{"go.etcd.io/etcd/server", "go.etcd.io/etcd/client", "go.etcd.io/raft"}},
	{pkg: "member", never: []string{"go.etcd.io/etcd/server", "go.etcd.io/bbolt"}},
	{pkg: "etcdclient", never: []string{"go.etcd.io/etcd/server", "go.etcd.io/bbolt"}},
	// The on-store format: nothing that talks to etcd (capture reads a live
	// cluster), no etcd module at all and no bbolt: it reads a full's
	// revision through internal/database.
	{pkg: "snapshot", never: []string{"go.etcd.io/", "google.golang.org/", "cloud.google.com", "github.com/aws", "github.com/Azure"}},
	{pkg: "capture", never: []string{"go.etcd.io/etcd/server", "cloud.google.com", "github.com/aws", "github.com/Azure"}},
	{pkg: "restore", never: []string{"cloud.google.com", "github.com/aws", "github.com/Azure"}},
	{pkg: "history", never: []string{"cloud.google.com", "github.com/aws", "github.com/Azure", clientGo}},
	{pkg: "tenant", never: []string{"cloud.google.com", "github.com/aws", "github.com/Azure", clientGo}},
	{pkg: "drill", never: []string{"cloud.google.com", "github.com/aws", "github.com/Azure", clientGo}},
	{pkg: "view", never: []string{"cloud.google.com", "github.com/aws", "github.com/Azure", clientGo}},
	{pkg: "compact", never: []string{"cloud.google.com", "github.com/aws", "github.com/Azure", clientGo}},
	{pkg: "startup", never: []string{"cloud.google.com", "github.com/aws", "github.com/Azure"}},
}

// clientGo is Kubernetes' client, which only heartbeat (and what sits at
// the top) may pull in: a binary that keeps no leases carries none of it.
const clientGo = "k8s.io/client-go"

// TestWeights fails when a package pulls in a module its weight does not
// allow.
func TestWeights(t *testing.T) {
	if testing.Short() {
		t.Skip("lists every package's dependencies with go list")
	}
	// Each package's dependencies, then each dependency's module.
	deps := map[string][]string{}
	for _, line := range goList(t, "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", module+"/...") {
		f := strings.Fields(line)
		deps[strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")] = f[1:]
	}
	moduleOf := map[string]string{}
	for _, line := range goList(t, "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", "-deps", module+"/...") {
		if pkg, mod, ok := strings.Cut(line, " "); ok && mod != "" && !ours(mod) {
			moduleOf[pkg] = mod
		}
	}
	modules := func(pkg string) []string {
		seen := map[string]bool{}
		var out []string
		for _, d := range deps[pkg] {
			if m := moduleOf[d]; m != "" && !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
		return out
	}
	for _, w := range weights {
		if _, ok := deps[w.pkg]; !ok {
			t.Errorf("weights name %s, which is not a package", w.pkg)
			continue
		}
		for _, m := range modules(w.pkg) {
			switch {
			case w.only != nil && !slices.Contains(w.only, m):
				t.Errorf("%s pulls in %s; it may pull in only %v", w.pkg, m, w.only)
			case slices.ContainsFunc(w.never, func(p string) bool { return strings.HasPrefix(m, p) }):
				t.Errorf("%s pulls in %s, which it must not (%v)", w.pkg, m, w.never)
			}
		}
	}
	for pkg := range deps {
		if l, _ := layerOf(pkg); l == top || pkg == "heartbeat" {
			continue
		}
		if slices.ContainsFunc(modules(pkg), func(m string) bool { return m == clientGo }) {
			t.Errorf("%s pulls in %s: only heartbeat may", pkg, clientGo)
		}
	}
}

// ours tells etcdkit's modules (the library and the modules beside it in
// go.work) from the modules they pull in.
func ours(mod string) bool { return mod == module || strings.HasPrefix(mod, module+"/") }

func goList(t *testing.T, format string, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
