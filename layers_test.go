package etcdkit_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/etcdkit/etcdkit"

// layers ranks the packages as ARCHITECTURE.md draws them: a package
// imports only packages of a lower layer. Internal helpers are layer 0;
// binaries, examples, benchmarks and test support are the top, where
// packages of one layer may import each other.
var layers = map[string]int{
	"store": 1, "tlsfiles": 1, "validate": 1, "member": 1,
	"store/s3": 2, "store/gcs": 2, "store/azure": 2, "etcdclient": 2, "snapshot": 2, "sidecar/api": 2, "sidecar/etcdbr/etcdbrapi": 2,
	"restore": 3, "defrag": 3, "heartbeat": 3,
	"startup": 4,
	"sidecar": 5, "wrapper": 5,
	"sidecar/etcdbr": 6,
	"etcdtest":       top, "examples": top, "internal/chaintest": top, "store/storetest": top, "bench": top, "": top,
}

const top = 7

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
