package etcdkit_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var updateGraphs = flag.Bool("update-graphs", false, "write the module graph table of ARCHITECTURE.md from measurements")

// graphLimits are the module graphs the light leaves promise an embedder
// (ARCHITECTURE.md, "Weight and module layout for embedders"): the graph
// of a module that imports the package alone, itself and the standard
// library's x/sys included.
var graphLimits = map[string]int{
	"store": 5, "store/storetest": 5, "tlsfiles": 5, "sidecar/api": 5, "etcdversion": 5,
	// validate and the on-store format: no etcd server, client-go or cloud
	// SDK either (TestWeights).
	"validate": 20, "snapshot": 20,
}

const (
	graphStart = "<!-- module graphs: go test -run TestModuleGraphs -update-graphs . -->"
	graphEnd   = "<!-- end of module graphs -->"
)

// workspace returns the directories go.work lists, "." for the library.
func workspace(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("go.work")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range regexp.MustCompile(`(?m)^\t(\.[^\s]*)$`).FindAllStringSubmatch(string(b), -1) {
		dirs = append(dirs, strings.TrimPrefix(m[1], "./"))
	}
	return dirs
}

// TestWorkspaceHoldsEveryModule: a go.mod that go.work does not list
// would be skipped by the test command, the lint and the builds.
func TestWorkspaceHoldsEveryModule(t *testing.T) {
	listed := workspace(t)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "tools" || path == filepath.Join("deploy", "monitoring") || strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" && !slices.Contains(listed, filepath.ToSlash(filepath.Dir(path))) {
			t.Errorf("%s is not in go.work: add it (go work use %s) and run tools/tidy.sh", path, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestModuleGraphs measures what an embedder meets: for each public
// package, a module that imports it alone, go mod tidy, go list -m all.
// The figures are ARCHITECTURE.md's table; a change that moves one (a new
// requirement, a bump that brings modules) writes the table again in the
// same commit, and the light leaves stay under their limits.
func TestModuleGraphs(t *testing.T) {
	if testing.Short() {
		t.Skip("tidies a module for each public package")
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	var replaces strings.Builder
	for _, dir := range workspace(t) {
		path := module
		if dir != "." {
			path += "/" + dir
		}
		fmt.Fprintf(&replaces, "replace %s => %s\n", path, filepath.Join(root, dir))
	}
	pkgs := publicPackages(t)
	got := make(map[string]int, len(pkgs))
	var mu sync.Mutex
	// Two at a time: each tidy is a go command reading the module cache.
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, pkg := range pkgs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			n, err := graphOf(t.Context(), t.TempDir(), replaces.String(), module+"/"+pkg)
			if err != nil {
				t.Errorf("%s: %v", pkg, err)
				return
			}
			mu.Lock()
			got[pkg] = n
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for pkg, limit := range graphLimits {
		if got[pkg] > limit {
			t.Errorf("an embedder importing %s has %d modules in its graph; its limit is %d", pkg, got[pkg], limit)
		}
	}
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := bytes.Cut(doc, []byte(graphStart))
	_, after, ok2 := bytes.Cut(rest, []byte(graphEnd))
	if !ok1 || !ok2 {
		t.Fatalf("ARCHITECTURE.md has no %s … %s section", graphStart, graphEnd)
	}
	table := graphTable(pkgs, got)
	if *updateGraphs {
		out := slices.Concat(before, []byte(graphStart+"\n"), table, []byte(graphEnd), after)
		if err := os.WriteFile("ARCHITECTURE.md", out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := bytes.TrimSpace(rest[:bytes.Index(rest, []byte(graphEnd))]); !bytes.Equal(want, bytes.TrimSpace(table)) {
		t.Errorf("ARCHITECTURE.md's module graphs are not the measured ones; write them again with: go test -run TestModuleGraphs -update-graphs .\nmeasured:\n%s", table)
	}
}

// graphOf tidies a module in dir that imports pkg and counts its graph.
func graphOf(ctx context.Context, dir, replaces, pkg string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	mod := "module example.com/embed\n\ngo 1.26.0\n\n" + replaces
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		return 0, err
	}
	src := fmt.Sprintf("package main\n\nimport _ %q\n\nfunc main() {}\n", pkg)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		return 0, err
	}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		// As an embedder builds: its own module, no workspace.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr)
		}
		return out, nil
	}
	if _, err := run("mod", "tidy"); err != nil {
		return 0, err
	}
	out, err := run("list", "-m", "all")
	if err != nil {
		return 0, err
	}
	return bytes.Count(out, []byte("\n")), nil
}

// publicPackages are the packages API-BUDGET holds.
func publicPackages(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(budgetFile)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var pkgs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			pkgs = append(pkgs, strings.Fields(line)[0])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func graphTable(pkgs []string, got map[string]int) []byte {
	var b bytes.Buffer
	b.WriteString("| package | modules in the graph | limit |\n|---|---:|---:|\n")
	for _, pkg := range pkgs {
		limit := ""
		if l, ok := graphLimits[pkg]; ok {
			limit = strconv.Itoa(l)
		}
		fmt.Fprintf(&b, "| `%s` | %d | %s |\n", pkg, got[pkg], limit)
	}
	return b.Bytes()
}
