package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

const rbacManifest = "../../deploy/kubernetes/rbac.yaml"

// etcd-backup serve keeps its leases with no more than the Role of
// deploy/kubernetes: the service account may get, create and update
// leases and nothing else, and that is enough to make and renew all
// three. When the Role loses update, the sidecar says what to grant,
// counts the failures and backs up all the same; given update again, it
// catches up. Clients, the API and the API server speak TLS, and etcd
// requires a password.
func TestServeKeepsItsLeases(t *testing.T) {
	t.Parallel()
	k := startKube(t, "etcd")
	k.apply(rbacManifest, "ServiceAccount", "Role", "RoleBinding")
	kubeconfig := k.kubeconfig("etcd")
	as := "--as=system:serviceaccount:etcd:etcd"
	for _, c := range []struct {
		verb, resource, ns string
		allowed            bool
	}{
		{"get", "leases.coordination.k8s.io", "etcd", true},
		{"create", "leases.coordination.k8s.io", "etcd", true},
		{"update", "leases.coordination.k8s.io", "etcd", true},
		{"patch", "leases.coordination.k8s.io", "etcd", false},
		{"list", "leases.coordination.k8s.io", "etcd", false},
		{"watch", "leases.coordination.k8s.io", "etcd", false},
		{"delete", "leases.coordination.k8s.io", "etcd", false},
		{"update", "leases.coordination.k8s.io", "default", false},
		{"get", "secrets", "etcd", false},
		{"get", "pods", "etcd", false},
	} {
		out, _ := k.api.Kubectl(t.Context(), nil, "auth", "can-i", c.verb, c.resource, "--namespace="+c.ns, as)
		if got := strings.TrimSpace(string(out)) == "yes"; got != c.allowed {
			t.Errorf("the sidecar's Role: can it %s %s in %s? %q, want %v", c.verb, c.resource, c.ns, out, c.allowed)
		}
	}

	c := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true, UnsafeNoFsync: true})
	sec := c.Security
	dir := t.TempDir()
	storeURL := "file://" + filepath.Join(dir, "store")
	tokenFile := filepath.Join(dir, "token")
	must(t, os.WriteFile(tokenFile, []byte("t0ken"), 0o600))
	port, err := etcdtest.FreePort()
	must(t, err)
	p := &sidecarProc{name: "etcd-0", url: fmt.Sprintf("https://127.0.0.1:%d", port)}
	p.args = append([]string{"serve", "--store", storeURL, "--endpoints", c.Endpoints()[0],
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--tls-cert", sec.Member.CertFile, "--tls-key", sec.Member.KeyFile,
		"--token-file", tokenFile, "--delta-period", "1s", "--full-schedule", "@every 1h", "--gc-period", "0s",
		"--follow-interval", "100ms", "--work-dir", t.TempDir(), "--log-format", "text",
		"--enable-member-lease-renewal", "--enable-snapshot-lease-renewal", "--k8s-heartbeat-duration", "1s"},
		connFlags(sec, "backup")...)
	p.env = []string{"POD_NAME=etcd-0", "POD_NAMESPACE=etcd", "KUBECONFIG=" + kubeconfig}
	p.start(t)

	// All three leases are made and filled.
	etcdtest.Eventually(t, "the sidecar makes its three leases", 20*time.Second, func() bool {
		roles, _ := k.members("etcd-0")
		return len(roles) == 1 && k.revision("full-snapshot-revisions") > 0 && k.revision("delta-snapshot-revisions") >= 0
	})
	cli := c.Client(t)
	rev := putKeys(t, cli, 10)
	etcdtest.Eventually(t, "the delta lease follows the writes", 10*time.Second, func() bool {
		return k.revision("delta-snapshot-revisions") >= rev
	})

	// The Role loses update.
	role, err := os.ReadFile(rbacManifest)
	must(t, err)
	k.kubectl([]byte(strings.Replace(string(role), "verbs: [get, create, update]", "verbs: [get, create]", 1)),
		"apply", "--namespace=etcd", "-f", "-")
	forbidden := regexp.MustCompile(`lease etcd/etcd-0: the API server forbids it: give this pod's service account get, update and create on leases .*cannot update resource \\"leases\\"`)
	etcdtest.Eventually(t, "the sidecar says which permission it lacks", 15*time.Second, func() bool {
		return forbidden.MatchString(p.logs.String())
	})
	t.Logf("the sidecar's log: %s", forbidden.FindString(p.logs.String()))
	rev = putKeys(t, cli, 10)
	st, err := store.Open(t.Context(), storeURL)
	must(t, err)
	etcdtest.Eventually(t, "the backups go on without the leases", 10*time.Second, func() bool {
		cat, err := snapshot.List(t.Context(), st)
		if err != nil {
			return false
		}
		chain, err := cat.Latest()
		return err == nil && chain.LastRevision() >= rev
	})
	if got := k.revision("delta-snapshot-revisions"); got >= rev {
		t.Fatalf("the delta lease was updated to %d without update", got)
	}
	metrics := httpsGet(t, sec.CA.File, p.url+"/metrics")
	if n := metricValue(metrics, `etcdkit_heartbeat_failures_total{lease="member"}`); n < 1 {
		t.Fatalf("the failures are not counted:\n%s", grepLines(metrics, "heartbeat"))
	}
	if code := httpsCode(t, sec.CA.File, p.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d while only the leases fail", code)
	}

	// update again: the leases catch up.
	k.apply(rbacManifest, "Role")
	etcdtest.Eventually(t, "the leases catch up once update is granted", 15*time.Second, func() bool {
		return k.revision("delta-snapshot-revisions") >= rev && strings.Contains(p.logs.String(), "heartbeat: lease written again")
	})
	must(t, p.term(t))
}

// putKeys writes n keys and returns the last revision.
func putKeys(t *testing.T, cli *clientv3.Client, n int) int64 {
	t.Helper()
	var rev int64
	for i := range n {
		resp, err := cli.Put(t.Context(), fmt.Sprintf("/leases/%d", i), "v")
		must(t, err)
		rev = resp.Header.Revision
	}
	return rev
}

func httpsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	must(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

func httpsGet(t *testing.T, caFile, url string) string {
	t.Helper()
	resp, err := httpsClient(t, caFile).Get(url)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(b)
}

func httpsCode(t *testing.T, caFile, url string) int {
	t.Helper()
	resp, err := httpsClient(t, caFile).Get(url)
	must(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// metricValue is the value of the series named exactly so; -1 when
// missing.
func metricValue(metrics, series string) float64 {
	for line := range strings.SplitSeq(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
