package etcdkit_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateBudget = flag.Bool("update-budget", false, "write API-BUDGET from the packages' exported names")

// budgetFile records how many names each public package exports: its
// top-level types, functions, variables and constants, and the exported
// methods of its types. A package grows its API by decision: the change
// that adds or removes names updates this file in the same commit, where
// a reviewer sees it.
const budgetFile = "API-BUDGET"

// TestAPIBudget fails when a public package's exported names are not the
// number API-BUDGET records.
func TestAPIBudget(t *testing.T) {
	got := map[string]int{}
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if dir != "." && (name == "tools" || name == "testdata" || name == "internal" || name == "cmd" || name == "examples" ||
			name == "bench" || name == "deploy" || strings.HasPrefix(name, ".") || name == "node_modules") {
			return filepath.SkipDir
		}
		if dir == "." {
			return nil
		}
		n, ok, err := exportedNames(dir)
		if ok {
			got[filepath.ToSlash(dir)] = n
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pkgs := make([]string, 0, len(got))
	for p := range got {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	if *updateBudget {
		var b strings.Builder
		b.WriteString("# Exported names per public package (top-level names and exported methods).\n")
		b.WriteString("# A change that adds or removes names updates this file: go test -run TestAPIBudget -update-budget .\n")
		total := 0
		for _, p := range pkgs {
			fmt.Fprintf(&b, "%s %d\n", p, got[p])
			total += got[p]
		}
		fmt.Fprintf(&b, "# total %d\n", total)
		if err := os.WriteFile(budgetFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(budgetFile)
	if err != nil {
		t.Fatal(err)
	}
	budget := map[string]int{}
	for line := range strings.Lines(string(b)) {
		var p string
		var n int
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if _, err := fmt.Sscanf(line, "%s %d", &p, &n); err != nil {
			t.Fatalf("%s: %q: %v", budgetFile, line, err)
		}
		budget[p] = n
	}
	for _, p := range pkgs {
		switch want, ok := budget[p]; {
		case !ok:
			t.Errorf("%s exports %d names and has no budget: add it to %s (go test -run TestAPIBudget -update-budget .)", p, got[p], budgetFile)
		case got[p] > want:
			t.Errorf("%s exports %d names, its budget is %d: a new name is a decision; record it in %s in the same change (-update-budget)", p, got[p], want, budgetFile)
		case got[p] < want:
			t.Errorf("%s exports %d names, its budget is %d: lower the budget in %s (-update-budget)", p, got[p], want, budgetFile)
		}
	}
	for p := range budget {
		if _, ok := got[p]; !ok {
			t.Errorf("%s has a budget in %s and no longer exports anything: remove it (-update-budget)", p, budgetFile)
		}
	}
}

// exportedNames counts the exported top-level names and exported methods
// of the package in dir, tests left out; ok is false without Go files.
func exportedNames(dir string) (n int, ok bool, err error) {
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		return 0, false, nil //nolint:nilerr // a directory without Go files
	}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return 0, false, err
		}
		ok = true
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && (d.Recv == nil || receiverExported(d.Recv)) {
					n++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							n++
						}
					case *ast.ValueSpec:
						for _, name := range s.Names {
							if name.IsExported() {
								n++
							}
						}
					}
				}
			}
		}
	}
	return n, ok, nil
}

// receiverExported says whether a method's receiver type is exported: a
// method of an unexported type is no one's API.
func receiverExported(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
