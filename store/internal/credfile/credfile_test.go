package credfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadJSONFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "aws.json")
	if err := os.WriteFile(p, []byte(`{"accessKeyID":"AK","secretAccessKey":" SK\n","region":"eu-west-1","s3ForcePathStyle":true,"endpoint":null}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("X_JSON", p)
	t.Setenv("X_DIR", "/does/not/matter")
	f, from, err := Load(nil, "X_JSON", "X_DIR")
	if err != nil {
		t.Fatal(err)
	}
	if f["accessKeyID"] != "AK" || f["secretAccessKey"] != "SK" || f["region"] != "eu-west-1" {
		t.Fatalf("fields: %v", f)
	}
	if ok, err := f.Bool("s3ForcePathStyle"); !ok || err != nil {
		t.Fatalf("s3ForcePathStyle: %v %v", ok, err)
	}
	if _, present := f["endpoint"]; present {
		t.Fatal("null field present")
	}
	if !strings.Contains(from, "X_JSON") {
		t.Fatalf("source %q", from)
	}
}

func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"storageAccount": "acct\n", "storageKey": "a2V5", "emulatorEnabled": "true"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "..2026_11_29"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("X_DIR", dir)
	f, _, err := Load(nil, "X_JSON_UNSET", "X_DIR")
	if err != nil {
		t.Fatal(err)
	}
	if f["storageAccount"] != "acct" || f["storageKey"] != "a2V5" {
		t.Fatalf("fields: %v", f)
	}
	if ok, _ := f.Bool("emulatorEnabled"); !ok {
		t.Fatal("emulatorEnabled not read")
	}
}

func TestLoadDirectoryPrefersJSON(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "accessKeyID"), []byte("from-file"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "creds.json"), []byte(`{"accessKeyID":"from-json"}`), 0o600)
	t.Setenv("X_DIR", dir)
	f, _, err := Load(nil, "X_JSON_UNSET", "X_DIR")
	if err != nil || f["accessKeyID"] != "from-json" {
		t.Fatalf("%v %v", f, err)
	}
}

func TestLoadErrors(t *testing.T) {
	f, _, err := Load(nil, "X_UNSET_1", "X_UNSET_2")
	if f != nil || err != nil {
		t.Fatalf("nothing set: %v %v", f, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte("not json"), 0o600)
	t.Setenv("X_JSON", bad)
	if _, _, err := Load(nil, "X_JSON", "X_DIR"); err == nil || !strings.Contains(err.Error(), "X_JSON="+bad) {
		t.Fatalf("bad JSON: %v", err)
	}
	t.Setenv("X_JSON", "")
	t.Setenv("X_DIR", t.TempDir())
	if _, _, err := Load(nil, "X_JSON", "X_DIR"); err == nil || !strings.Contains(err.Error(), "no credential files") {
		t.Fatalf("empty dir: %v", err)
	}
}

// etcd-druid sets the variables where no secret is mounted (pod identity):
// an absent path is no credential file, not an error.
func TestLoadAbsentPath(t *testing.T) {
	t.Setenv("X_JSON", filepath.Join(t.TempDir(), "absent.json"))
	t.Setenv("X_DIR", filepath.Join(t.TempDir(), "absent"))
	if f, from, err := Load(nil, "X_JSON", "X_DIR"); f != nil || from != "" || err != nil {
		t.Fatalf("absent paths: %v %q %v", f, from, err)
	}
}

// A directory with roleARN and token is a web identity: the token is read
// by its path, as it rotates.
func TestLoadWebIdentityDirectory(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "roleARN"), []byte("arn:aws:iam::1:role/r\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "token"), []byte("a-token"), 0o600)
	t.Setenv("X_DIR", dir)
	f, _, err := Load(nil, "X_UNSET", "X_DIR")
	if err != nil || f["roleARN"] != "arn:aws:iam::1:role/r" || f["tokenPath"] != filepath.Join(dir, "token") || f["token"] != "" {
		t.Fatalf("%v %v", f, err)
	}
}

// Watch reads a changed file again, and keeps the last good fields while
// a change does not read.
func TestWatchReadsRotatedFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "creds.json")
	write := func(body string) {
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"accessKeyID":"one"}`)
	t.Setenv("X_JSON", p)
	w, _, err := Watch(nil, "X_JSON", "X_UNSET")
	if err != nil || w == nil {
		t.Fatalf("watch: %v %v", w, err)
	}
	for _, step := range []struct{ body, want string }{{`{"accessKeyID":"two"}`, "two"}, {`not json`, "two"}, {`{"accessKeyID":"three"}`, "three"}} {
		write(step.body)
		if f, err := w.Get(); err != nil || f["accessKeyID"] != step.want {
			t.Fatalf("after writing %s: %v %v, want %s", step.body, f, err, step.want)
		}
	}
}
