package credfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// nil fields and no error when neither variable is set, and says where the
// fields came from for messages.
func Load(jsonEnv, dirEnv string) (Fields, string, error) {
	if path := os.Getenv(jsonEnv); path != "" {
		f, err := readJSON(path)
		if err != nil {
			return nil, "", fmt.Errorf("%s=%s: %w", jsonEnv, path, err)
		}
		return f, jsonEnv + "=" + path, nil
	}
	dir := os.Getenv(dirEnv)
	if dir == "" {
		return nil, "", nil
	}
	f, err := readDir(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%s=%s: %w", dirEnv, dir, err)
	}
	return f, dirEnv + "=" + dir, nil
}

func readJSON(path string) (Fields, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON object of credential fields: %w", err)
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
			return nil, fmt.Errorf("field %s is not a string, number or boolean", k)
		}
	}
	return f, nil
}

func readDir(dir string) (Fields, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	// etcd-backup-restore prefers a JSON file in the directory over
	// per-field files.
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			return readJSON(filepath.Join(dir, e.Name()))
		}
	}
	f := Fields{}
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
			return nil, err
		}
		f[e.Name()] = strings.TrimSpace(string(data))
	}
	if len(f) == 0 {
		return nil, errors.New("no credential files in the directory")
	}
	return f, nil
}
