package wrapper

import (
	"os"
	"path/filepath"
	"testing"
)

// etcd's own loader exits the process on some bad values; ours must turn
// every file into a configuration or an error. A fuzz input that makes
// the test process exit shows up as a crash.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(goodConfig))
	f.Add([]byte(goodConfig + "experimental-initial-corrupt-check: true\n"))
	f.Add([]byte("listen-client-urls: http://127.0.0.1:notaport\n"))
	f.Add([]byte("initial-cluster: a=http://x:1,b\n"))
	f.Add([]byte("name: ${POD_NAME}\n"))
	f.Add([]byte("client-transport-security:\n  cert-file: /x\n  auto-tls: yes\n"))
	path := filepath.Join(f.TempDir(), "etcd.yaml")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _ = LoadConfig(path)
	})
}
