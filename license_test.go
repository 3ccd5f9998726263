package etcdkit_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateNotice = flag.Bool("update-notice", false, "write NOTICE from the dependencies' NOTICE files")

// Every module of the repository is under the root's LICENSE, Apache-2.0:
// the go command puts the repository root's LICENSE into the zip of a
// nested module that has none (cmd/go/internal/modfetch), so no module
// keeps one of its own.
func TestLicense(t *testing.T) {
	b, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("Apache License\n                           Version 2.0, January 2004")) ||
		!bytes.Contains(b, []byte("END OF TERMS AND CONDITIONS")) {
		t.Fatal("LICENSE is not the Apache License 2.0")
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "go.mod" || path == "go.mod" {
			return err
		}
		if strings.Contains(path, "testdata") {
			return nil
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), "LICENSE")); err == nil {
			t.Errorf("%s has a LICENSE of its own: the root's covers it", filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// NOTICE carries the NOTICE file of every module linked into what
// etcdkit ships (its binaries, and the etcd servers its images carry), as
// the Apache License asks of a redistribution (section 4d).
func TestNotice(t *testing.T) {
	want := notice(t)
	if *updateNotice {
		if err := os.WriteFile("NOTICE", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("NOTICE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("NOTICE is not the dependencies' NOTICE files; write it again with: go test -run TestNotice -update-notice .\nwant:\n%s", want)
	}
}

// notice is NOTICE as it should read: etcdkit's own, then each module's
// NOTICE text once, in the order of the modules' paths.
func notice(t *testing.T) []byte {
	texts := map[string][]string{} // text → modules
	for _, list := range [][]string{
		{".", "./cmd/..."},
		{"tools/etcd35", "go.etcd.io/etcd/server/v3"},
		{"tools/etcd36", "go.etcd.io/etcd/server/v3"},
	} {
		cmd := exec.Command("go", "list", "-deps", "-json=Module", list[1])
		cmd.Dir = list[0]
		if strings.HasPrefix(list[0], "tools/") {
			// tools' modules are outside the workspace.
			cmd.Env = append(os.Environ(), "GOWORK=off")
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", list[0], err)
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var p struct{ Module *struct{ Path, Dir string } }
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			if p.Module == nil || ours(p.Module.Path) {
				continue
			}
			for _, name := range []string{"NOTICE", "NOTICE.txt", "NOTICE.md"} {
				b, err := os.ReadFile(filepath.Join(p.Module.Dir, name))
				if err != nil {
					continue
				}
				text := strings.TrimSpace(string(b))
				if !slices.Contains(texts[text], p.Module.Path) {
					texts[text] = append(texts[text], p.Module.Path)
				}
			}
		}
	}
	type entry struct{ modules, text string }
	var entries []entry
	for text, mods := range texts {
		slices.Sort(mods)
		entries = append(entries, entry{strings.Join(mods, ", "), text})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.modules+a.text, b.modules+b.text) })
	var buf bytes.Buffer
	buf.WriteString(`etcdkit
Copyright 2026 The etcdkit authors

Licensed under the Apache License, Version 2.0 (LICENSE).

etcdkit's binaries and images include the following Go modules, whose
NOTICE files read as below (kept by TestNotice in license_test.go).
`)
	for _, e := range entries {
		buf.WriteString("\n---- " + e.modules + "\n\n" + e.text + "\n")
	}
	return buf.Bytes()
}
