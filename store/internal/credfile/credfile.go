package credfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/etcdkit/etcdkit/internal/reload"
)

// Fields are the credential fields found, by their etcd-backup-restore
// names (accessKeyID, storageAccount, …), values trimmed of surrounding
// white space.
type Fields map[string]string

// Bool returns field name as a boolean; absent is false.
func (f Fields) Bool(name string) (bool, error) {
	v, ok := f[name]
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("field %s=%q is not a boolean", name, v)
	}
	return b, nil
}

// Load reads the fields named by the environment variables jsonEnv (a JSON
// file) and dirEnv (a directory), in that order of preference. It returns
// nil fields and no error when neither variable is set, or when the one set
// names a path that does not exist: etcd-druid sets the variables whether
// or not a secret is mounted (pod identity needs none), and the SDK's own
// chain is then the credential; log hears that once. It says where the
// fields came from for messages.
func Load(log *slog.Logger, jsonEnv, dirEnv string) (Fields, string, error) {
	f, from, _, err := load(log, jsonEnv, dirEnv)
	return f, from, err
}

// Watch is Load, and then the fields as the files hold them at each Get:
// a rotated secret is read again when a file it came from changes (a
// Kubernetes secret volume swaps them all at once), and a change that does
// not read (a rotation half done) keeps the last good fields. The File is
// nil when Load finds no fields.
func Watch(log *slog.Logger, jsonEnv, dirEnv string) (*reload.File[Fields], string, error) {
	f, from, paths, err := load(log, jsonEnv, dirEnv)
	if f == nil || err != nil {
		return nil, from, err
	}
	w := reload.New(func() (Fields, error) {
		f, _, _, err := load(nil, jsonEnv, dirEnv)
		if err == nil && f == nil {
			err = fmt.Errorf("%s: the credential file is gone", from)
		}
		return f, err
	}, log, paths...)
	if _, err := w.Get(); err != nil {
		return nil, from, err
	}
	return w, from, nil
}

// load is Load, with the files the fields were read from.
func load(log *slog.Logger, jsonEnv, dirEnv string) (Fields, string, []string, error) {
	for _, env := range []string{jsonEnv, dirEnv} {
		path := os.Getenv(env)
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if log != nil {
				log.Info("the credential file a variable names is absent: the SDK's default credentials are used (pod identity, instance role, environment)",
					"variable", env, "path", path)
			}
			continue
		}
		read := readDir
		if env == jsonEnv {
			read = readJSON
		}
		f, paths, err := read(path)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s=%s: %w", env, path, err)
		}
		return f, env + "=" + path, paths, nil
	}
	return nil, "", nil, nil
}

func readJSON(path string) (Fields, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, nil, fmt.Errorf("not a JSON object of credential fields: %w", err)
	}
	f := Fields{}
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			f[k] = strings.TrimSpace(v)
		case bool, float64:
			f[k] = fmt.Sprint(v)
		case nil:
		default:
			return nil, nil, fmt.Errorf("field %s is not a string, number or boolean", k)
		}
	}
	return f, []string{path}, nil
}

func readDir(dir string) (Fields, []string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	// etcd-backup-restore prefers a JSON file in the directory over
	// per-field files.
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			return readJSON(filepath.Join(dir, e.Name()))
		}
	}
	f := Fields{}
	var paths []string
	for _, e := range entries {
		// Kubernetes secret volumes hold ..data links and dot directories.
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p)
		if err != nil || st.IsDir() {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		f[e.Name()] = strings.TrimSpace(string(data))
		paths = append(paths, p)
	}
	if len(f) == 0 {
		return nil, nil, errors.New("no credential files in the directory")
	}
	// etcd-backup-restore's web identity secret: the role in roleARN, the
	// token in the file "token", read by path so that a rotated token is
	// read again, never from these fields.
	if f["roleARN"] != "" && f["tokenPath"] == "" {
		if _, ok := f["token"]; ok {
			f["tokenPath"] = filepath.Join(dir, "token")
		}
		delete(f, "token")
	}
	return f, paths, nil
}
