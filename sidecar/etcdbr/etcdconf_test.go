package etcdbr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// etcd-druid's ConfigMap, as its configmap component writes it for three
// members with a name prefix and client TLS.
const druidConf = `name: etcd-config
data-dir: /var/etcd/data/new.etcd
wal-dir: /var/etcd/wal
metrics: basic
snapshot-count: 75000
quota-backend-bytes: 8589934592
initial-cluster-token: etcd-cluster
initial-cluster-state: new
initial-cluster: p-etcd-main-0=https://etcd-main-0.etcd-main-peer.ns.svc:2380,p-etcd-main-1=https://etcd-main-1.etcd-main-peer.ns.svc:2380,p-etcd-main-2=https://etcd-main-2.etcd-main-peer.ns.svc:2380
auto-compaction-mode: periodic
auto-compaction-retention: 30m
listen-peer-urls: https://0.0.0.0:2380
listen-client-urls: https://0.0.0.0:2379
initial-advertise-peer-urls:
  p-etcd-main-0:
  - https://etcd-main-0.etcd-main-peer.ns.svc:2380
  p-etcd-main-1:
  - https://etcd-main-1.etcd-main-peer.ns.svc:2380
  - https://10.0.0.2:2380
  p-etcd-main-2:
  - https://etcd-main-2.etcd-main-peer.ns.svc:2380
advertise-client-urls:
  p-etcd-main-0:
  - https://etcd-main-0.etcd-main-peer.ns.svc:2379
  p-etcd-main-1:
  - https://etcd-main-1.etcd-main-peer.ns.svc:2379
  p-etcd-main-2:
  - https://etcd-main-2.etcd-main-peer.ns.svc:2379
client-transport-security:
  cert-file: /var/etcd/ssl/server/tls.crt
  key-file: /var/etcd/ssl/server/tls.key
  client-cert-auth: true
  trusted-ca-file: /var/etcd/ssl/ca/ca.crt
  auto-tls: false
member-name-prefix: p
next-cluster-version-compatible: true
`

func writeConf(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "etcd.conf.yaml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A member's configuration is the shared one with its name (prefix and
// pod), its own advertise URLs joined by commas, and the initial cluster
// and state given; every other key is passed on as written, keys sorted.
func TestEtcdConfRendersOneMember(t *testing.T) {
	c, err := LoadEtcdConf(writeConf(t, druidConf))
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Member("etcd-main-1")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "p-etcd-main-1" || len(m.PeerURLs) != 2 || ClusterSize(c.InitialCluster) != 3 || c.WALDir != "/var/etcd/wal" {
		t.Fatalf("member %+v, cluster size %d", m, ClusterSize(c.InitialCluster))
	}
	if others := c.OtherClientURLs(m.Name); len(others) != 2 || strings.Contains(strings.Join(others, ","), "etcd-main-1.") {
		t.Fatalf("the other members' client URLs: %v", others)
	}
	b, err := c.Render(m, "p-etcd-main-0=https://etcd-main-0.etcd-main-peer.ns.svc:2380,p-etcd-main-1=https://etcd-main-1.etcd-main-peer.ns.svc:2380", "existing")
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"advertise-client-urls: https://etcd-main-1.etcd-main-peer.ns.svc:2379\n",
		"initial-advertise-peer-urls: https://etcd-main-1.etcd-main-peer.ns.svc:2380,https://10.0.0.2:2380\n",
		"initial-cluster: p-etcd-main-0=https://etcd-main-0.etcd-main-peer.ns.svc:2380,p-etcd-main-1=https://etcd-main-1.etcd-main-peer.ns.svc:2380\n",
		"initial-cluster-state: existing\n", "name: p-etcd-main-1\n", "quota-backend-bytes: 8589934592\n",
		"client-transport-security:\n  auto-tls: false\n  cert-file: /var/etcd/ssl/server/tls.crt\n",
		// A WAL volume of its own (druid#1147) reaches the wrapper, and
		// the start-up validates, restores and moves it aside.
		"wal-dir: /var/etcd/wal\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered config lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasPrefix(got, "advertise-client-urls:") {
		t.Errorf("keys are not sorted:\n%s", got)
	}
}

// A configuration that cannot name the member's URLs is refused with the
// key and the member.
func TestEtcdConfRefusals(t *testing.T) {
	for _, c := range []struct{ conf, pod, want string }{
		{"initial-cluster: a=http://x:2380\n", "a", "initial-advertise-peer-urls has no URLs for member \"a\""},
		{"advertise-client-urls: [1, 2]\ninitial-cluster: a=http://x:2380\n", "a", "advertise-client-urls: a map of member name to URLs"},
		{"initial-advertise-peer-urls:\n  a: not a url\ninitial-cluster: a=http://x:2380\n", "a", `"not a url" is not a URL`},
		{"name: x\n", "a", "initial-cluster is not set"},
		{druidConf, "", "POD_NAME is not set"},
	} {
		conf, err := LoadEtcdConf(writeConf(t, c.conf))
		if err == nil {
			_, err = conf.Member(c.pod)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.conf, err, c.want)
		}
	}
	if _, err := LoadEtcdConf(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "set ETCD_CONF") {
		t.Errorf("a missing file: %v", err)
	}
}
