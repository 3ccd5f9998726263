package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
)

var updateJSON = flag.Bool("update-json", false, "write testdata/json/*.golden from the commands' output")

// The JSON each command prints with -o json is a contract with the
// scripts that read it (JSON.md): its fields, their nesting and their
// types are held by testdata/json/<command>.golden, and each field is
// described in JSON.md. A field added, renamed or retyped fails here
// until the golden file and JSON.md say so (go test -run TestJSONContract
// -update-json, then describe it).
func TestJSONContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true}
	c := etcdtest.Start(t, opts)
	cli := c.Client(t)
	eps := strings.Join(c.Endpoints(), ",")
	conn := connFlags(c.Security, "backup")
	store := "file://" + filepath.Join(t.TempDir(), "b")
	base := append([]string{"--store", store, "--endpoints", eps}, conn...)
	work := etcdtest.Workload{Ops: 100, Prefix: "/app/", Seed: 3, TxnPercent: 10, DeletePercent: 10}
	if _, err := work.Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	shapes := map[string][]string{}
	run := func(name string, args ...string) {
		t.Helper()
		out := ok(t, nil, append(args, "-o", "json")...)
		var v any
		dec := json.NewDecoder(strings.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s -o json printed no JSON: %v\n%s", name, err, out)
		}
		shapes[name] = shapeOf(v)
	}
	run("version", "version")
	run("snapshot", append([]string{"snapshot"}, base...)...)
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	from := resp.Header.Revision
	work.Seed = 4
	if _, err := work.Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "/app/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	ok(t, nil, append([]string{"snapshot", "--delta"}, base...)...)
	var listed listResult
	if err := json.Unmarshal([]byte(ok(t, nil, "list", "--store", store, "-o", "json")), &listed); err != nil {
		t.Fatal(err)
	}
	run("pin", "pin", "--store", store, listed.Chains[0].Full.Key, "--label", "before-upgrade")
	run("list", "list", "--store", store, "--check")
	run("verify", append([]string{"verify", "--against", eps}, base...)...)
	run("get", "get", "--store", store, "--prefix", "/app/", "--revision", fmt.Sprint(from))
	run("diff", "diff", "--store", store, "--from", fmt.Sprint(from))
	run("undelete", append([]string{"undelete", "--prefix", "/app/", "--revision", fmt.Sprint(from)}, base...)...)
	run("restore", "restore", "--store", store, "--data-dir", filepath.Join(t.TempDir(), "m"), "--name", "m0", "--peer-urls", "http://127.0.0.1:2380")
	run("restore --prefix --to", append([]string{"restore", "--prefix", "/app/", "--revision", fmt.Sprint(from), "--to", eps}, base...)...)
	run("check-upgrade", append([]string{"check-upgrade", "--to", "3.7"}, base...)...)
	run("defrag", append([]string{"defrag", "--dry-run", "--defrag-pause", "0s"}, base...)...)
	run("compact", append([]string{"compact", "--work-dir", t.TempDir()}, base...)...)
	run("gc", "gc", "--store", store, "--retention-policy", "limit-based", "--max-fulls", "1", "--dry-run")
	run("delete", "delete", "--store", store, "--before", "2100-01-01", "--dry-run")
	run("fleet", "fleet", "--store", "file://"+filepath.Dir(strings.TrimPrefix(store, "file://")))

	dir := filepath.Join("testdata", "json")
	doc, err := os.ReadFile("../../JSON.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		got := []byte(strings.Join(shapes[name], "\n") + "\n")
		file := filepath.Join(dir, strings.NewReplacer(" --", "_", " ", "_", "-", "_").Replace(name)+".golden")
		if *updateJSON {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s -o json changed its fields (JSON.md is the contract; if meant, run go test -run TestJSONContract -update-json and describe them):\ngot:\n%s\nwant:\n%s", name, got, want)
		}
		section := docSection(string(doc), name)
		if section == "" {
			t.Errorf("JSON.md has no section \"## %s\"", name)
			continue
		}
		for _, line := range shapes[name] {
			path, _, _ := strings.Cut(line, ": ")
			// A list's elements are described with the list.
			path = strings.TrimSuffix(path, "[]")
			if path != "." && path != "" && !strings.Contains(section, "`"+path+"`") {
				t.Errorf("JSON.md, %s: field `%s` is not described", name, path)
			}
		}
	}
}

// shapeOf lists the fields of a JSON value with their types, one line per
// path: objects' fields by name, arrays' elements as [], and the keys of
// an object that is a map of data (a key that is no identifier, such as a
// key prefix or a member's name) as *.
func shapeOf(v any) []string {
	set := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			set[path+": object"] = true
			for k, e := range v {
				name := k
				if !identifier.MatchString(k) {
					name = "*"
				}
				walk(strings.TrimPrefix(path+"."+name, "."), e)
			}
		case []any:
			set[path+": array"] = true
			for _, e := range v {
				walk(path+"[]", e)
			}
		case string:
			set[path+": string"] = true
		case json.Number:
			set[path+": number"] = true
		case bool:
			set[path+": bool"] = true
		case nil:
			set[path+": null"] = true
		}
	}
	walk("", v)
	out := make([]string, 0, len(set))
	for line := range set {
		if strings.HasPrefix(line, ": ") {
			line = "." + line
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// docSection is the text of JSON.md under "## name", up to the next
// heading of that level.
func docSection(doc, name string) string {
	_, after, ok := strings.Cut(doc, "\n## "+name+"\n")
	if !ok {
		return ""
	}
	section, _, _ := strings.Cut(after, "\n## ")
	return section
}
