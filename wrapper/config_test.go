package wrapper

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "etcd.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodConfig = `name: m0
data-dir: /var/lib/etcd
listen-peer-urls: http://127.0.0.1:2380
initial-advertise-peer-urls: http://127.0.0.1:2380
listen-client-urls: http://127.0.0.1:2379
advertise-client-urls: http://127.0.0.1:2379
initial-cluster: m0=http://127.0.0.1:2380
initial-cluster-token: tok
initial-cluster-state: new
snapshot-count: 10000
feature-gates: InitialCorruptCheck=true
client-transport-security:
  client-cert-auth: false
`

func TestLoadConfig(t *testing.T) {
	cfg, err := LoadConfig(writeConfig(t, goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "m0" || cfg.Dir != "/var/lib/etcd" || cfg.InitialClusterToken != "tok" || cfg.SnapshotCount != 10000 {
		t.Fatalf("loaded %+v", cfg)
	}
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{"removed experimental key, a feature gate now", "experimental-initial-corrupt-check: true\n",
			[]string{"experimental-initial-corrupt-check", "removed in etcd 3.7", "feature-gates: InitialCorruptCheck=true"}},
		{"removed experimental key, renamed", "experimental-compaction-batch-limit: 500\n",
			[]string{"experimental-compaction-batch-limit", `"compaction-batch-limit"`}},
		{"unknown key", "snapshot-cnt: 5\n", []string{`"snapshot-cnt" is not a key`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(writeConfig(t, goodConfig+tc.extra))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
		})
	}
	// ${VAR} comes from the environment; an unset one is an error.
	t.Setenv("POD_NAME", "etcd-2")
	cfg, err = LoadConfig(writeConfig(t, strings.Replace(goodConfig, "name: m0", "name: ${POD_NAME}", 1)))
	if err != nil || cfg.Name != "etcd-2" {
		t.Fatalf("name from the environment: %v %v", cfg, err)
	}
	if _, err := LoadConfig(writeConfig(t, strings.Replace(goodConfig, "name: m0", "name: ${NO_SUCH_VAR}", 1))); err == nil || !strings.Contains(err.Error(), "NO_SUCH_VAR") {
		t.Fatalf("unset variable: %v", err)
	}
	// Not in comments, and a missing one is named once.
	commented := strings.Replace(goodConfig, "name: m0", "name: m0 # was ${OLD_NAME}\n# data-dir: /var/lib/${NOT_SET_EITHER}\ninitial-cluster-token: '#${POD_NAME}'", 1)
	commented = strings.Replace(commented, "initial-cluster-token: tok\n", "", 1)
	if cfg, err := LoadConfig(writeConfig(t, commented)); err != nil || cfg.Name != "m0" || cfg.InitialClusterToken != "#etcd-2" {
		t.Fatalf("variables in comments: %+v %v", cfg, err)
	}
	twice := strings.Replace(goodConfig, "name: m0", "name: ${NO_SUCH_VAR}\ninitial-cluster-token: ${NO_SUCH_VAR}", 1)
	twice = strings.Replace(twice, "initial-cluster-token: tok\n", "", 1)
	if _, err := LoadConfig(writeConfig(t, twice)); err == nil || strings.Count(err.Error(), "NO_SUCH_VAR") != 1 {
		t.Fatalf("a variable missing twice: %v", err)
	}
	// No data dir: etcd would pick one in the working directory.
	if _, err := LoadConfig(writeConfig(t, strings.Replace(goodConfig, "data-dir: /var/lib/etcd\n", "", 1))); err == nil || !strings.Contains(err.Error(), `"data-dir" is not set`) {
		t.Fatalf("no data dir: %v", err)
	}
	// etcd exits the process on a URL it cannot parse; here it is an error.
	bad := strings.Replace(goodConfig, "listen-client-urls: http://127.0.0.1:2379", "listen-client-urls: http://127.0.0.1:notaport", 1)
	if _, err := LoadConfig(writeConfig(t, bad)); err == nil || !strings.Contains(err.Error(), "listen-client-urls") {
		t.Fatalf("bad URL: %v", err)
	}
	bad = strings.Replace(goodConfig, "initial-cluster: m0=http://127.0.0.1:2380", "initial-cluster: m0", 1)
	if _, err := LoadConfig(writeConfig(t, bad)); err == nil || !strings.Contains(err.Error(), "initial-cluster") {
		t.Fatalf("bad initial cluster: %v", err)
	}
}

// The wrapper reaches etcd as etcd's own configuration says: the CA
// bundle, and the certificate etcd presents as a client.
func TestClientConn(t *testing.T) {
	const secure = `name: m0
data-dir: /var/lib/etcd
listen-client-urls: https://127.0.0.1:2379
advertise-client-urls: https://127.0.0.1:2379
client-transport-security:
  cert-file: /tls/server.pem
  key-file: /tls/server-key.pem
  trusted-ca-file: /tls/ca.pem
  client-cert-auth: true
`
	for _, tc := range []struct {
		name, extra         string
		cert, key, certName string
		insecure            bool
	}{
		{"the server certificate", "", "/tls/server.pem", "/tls/server-key.pem", "client-transport-security: cert-file", false},
		{"a client certificate of its own", "  client-cert-file: /tls/client.pem\n  client-key-file: /tls/client-key.pem\n", "/tls/client.pem", "/tls/client-key.pem", "client-transport-security: client-cert-file", false},
		{"auto-tls", "  auto-tls: true\n", "/tls/server.pem", "/tls/server-key.pem", "client-transport-security: cert-file", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := LoadConfig(writeConfig(t, secure+tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			f := ClientConn(cfg).TLS
			if f.CA != "/tls/ca.pem" || f.Cert != tc.cert || f.Key != tc.key || f.Names.Cert != tc.certName || f.InsecureSkipVerify != tc.insecure {
				t.Fatalf("%+v", f)
			}
		})
	}
}
