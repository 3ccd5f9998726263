package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/heartbeat"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
)

// The flags of etcd-backup server, copy, compact, initialize and (with
// --storage-provider) snapshot and restore are etcd-backup-restore's:
// the same names, shorthands, types and defaults as "etcdbrctl <command>
// --help" lists them (testdata, from its source), no more and no fewer
// (compact has its own besides).
func TestFlagsAreEtcdBackupRestores(t *testing.T) {
	for _, c := range []struct {
		command string
		flags   func(*pflag.FlagSet)
	}{{"server", new(brServer).flags}, {"copy", new(brCopy).flags}, {"compact", new(brCompact).flags},
		{"initialize", new(brInitialize).flags}, {"snapshot", new(brSnapshot).flags}, {"restore", new(brRestore).flags}} {
		want := readFlagList(t, "testdata/etcdbrctl-"+c.command+"-flags.txt")
		fs := pflag.NewFlagSet(c.command, pflag.ContinueOnError)
		c.flags(fs)
		var got []string
		fs.VisitAll(func(f *pflag.Flag) {
			// As pflag's usage prints them: a zero default is left out, a
			// string's is quoted, an int64 is an int.
			typ, def := f.Value.Type(), f.DefValue
			switch typ {
			case "bool":
				typ = ""
			case "stringSlice":
				typ = "strings"
			case "int64":
				typ = "int"
			case "string":
				if def != "" {
					def = strconv.Quote(def)
				}
			}
			if slices.Contains([]string{"0", "0s", "false", "[]"}, def) {
				def = ""
			}
			got = append(got, strings.Join(slices.DeleteFunc([]string{f.Name, f.Shorthand, typ, def}, func(s string) bool { return s == "" }), " "))
		})
		// etcdkit's own flags beside etcd-backup-restore's, none of
		// which it has.
		own := map[string][]string{"server": {`secondary-retention string "same"`, "full-splay duration", "upload-limit size", "download-limit size"}}[c.command]
		for _, f := range own {
			if slices.Contains(want, f) || !slices.Contains(got, f) {
				t.Errorf("%s: etcdkit's own flag %s is etcd-backup-restore's, or missing", c.command, f)
			}
		}
		got = slices.DeleteFunc(got, func(f string) bool { return slices.Contains(own, f) })
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s's flags differ from etcd-backup-restore's:\n%s", c.command, lineDiff(want, got))
		}
	}
}

// readFlagList reads a testdata list, one flag per line, # comments.
func readFlagList(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out
}

func lineDiff(want, got []string) string {
	var b strings.Builder
	for _, w := range want {
		if !slices.Contains(got, w) {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "+ %s\n", g)
		}
	}
	return b.String()
}

// A provider, container and prefix name the same place etcd-backup-restore
// stores in; an unknown provider, and a cloud one without a container,
// are refused with what to set.
func TestServerStoreURLs(t *testing.T) {
	t.Setenv("HOME", "/home/nonroot")
	t.Setenv("STORAGE_CONTAINER", "bucket-a")
	for _, c := range []struct {
		store brStore
		want  string
	}{
		{brStore{provider: "S3", prefix: "shoot--p--c/etcd-main"}, "s3://bucket-a/shoot--p--c/etcd-main"},
		{brStore{provider: "S3", container: "b", prefix: "p", endpoint: "http://127.0.0.1:9000"}, "s3://b/p?endpoint=http%3A%2F%2F127.0.0.1%3A9000"},
		{brStore{provider: "GCS", prefix: "p"}, "gs://bucket-a/p"},
		{brStore{provider: "ABS", prefix: "p", endpoint: "http://127.0.0.1:10000/devstoreaccount1"}, "azblob://bucket-a/p?endpoint=http%3A%2F%2F127.0.0.1%3A10000%2Fdevstoreaccount1"},
		{brStore{provider: "Local", container: "backups", prefix: "etcd-main"}, "file:///home/nonroot/backups/etcd-main"},
		{brStore{provider: "Local", prefix: "p"}, "file:///home/nonroot/bucket-a/p"},
		{brStore{provider: "ECS", prefix: "p"}, "s3://bucket-a/p?provider=ecs"},
		{brStore{provider: "OCS", prefix: "p"}, "s3://bucket-a/p?provider=ocs"},
		{brStore{provider: "OSS", prefix: "p"}, "s3://bucket-a/p?provider=oss"},
		{brStore{provider: "Swift", prefix: "p"}, "swift://bucket-a/p"},
		{brStore{provider: "openstack", prefix: "p"}, "swift://bucket-a/p"},
		{brStore{}, ""},
	} {
		got, err := c.store.url("STORAGE_CONTAINER")
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.store, got, err, c.want)
		}
	}
	t.Setenv("STORAGE_CONTAINER", "")
	for _, c := range []struct {
		store brStore
		want  string
	}{
		{brStore{provider: "B2"}, `storage provider "B2": etcdkit stores backups on S3`},
		{brStore{provider: "S3", prefix: "p"}, "no container: set --store-container or STORAGE_CONTAINER"},
	} {
		if _, err := c.store.url("STORAGE_CONTAINER"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.store, err, c.want)
		}
	}
	// Flags etcd-backup-restore does not have are refused; its flags that
	// mean nothing here are accepted.
	r := etcdBackup(t, nil, "server", "--storage-provider=Local", "--no-such-flag")
	if r.code != exitUsage || !strings.Contains(r.stderr, "unknown flag: --no-such-flag") {
		t.Errorf("an unknown flag: exit %d, %s", r.code, r.stderr)
	}
	r = etcdBackup(t, nil, "server", "--storage-provider=B2", "--embedded-etcd-quota-bytes=8589934592")
	if r.code != exitUsage || !strings.Contains(r.stderr, `storage provider "B2"`) {
		t.Errorf("an unsupported provider: exit %d, %s", r.code, r.stderr)
	}
}

// druid is an etcd-druid-style cluster on loopback: each member's
// sidecar is an etcd-backup server process started with the arguments
// etcd-druid's StatefulSet gives etcd-backup-restore, and its etcd is
// started the way Gardener's etcd-wrapper starts it, by a minimal client
// of etcd-backup-restore's protocol (brWrapper). Member i advertises its
// client URL on 127.0.0.(i+1), where its sidecar listens at the one port
// every sidecar shares, so a follower finds the leader's sidecar as
// etcd-backup-restore does. Clients, peers and the sidecars speak TLS.
type druid struct {
	t        *testing.T
	sec      *etcdtest.Security
	caPool   *x509.CertPool
	dir      string
	storeDir string
	port     int
	members  []*druidMember
	// size is how many of the members the configuration lists.
	size    int
	cluster string
	// storeless: the Etcd has no backup store, so etcd-druid passes no
	// store flags.
	storeless bool
	// storeArgs, when set, stand for the Local provider's flag, and env
	// is added to the servers' environment (another store's credentials).
	storeArgs, env []string
	// source is bootstrapWithExistingCluster's: its members, appended to
	// initial-cluster, and its client endpoints, to --service-endpoints.
	source *etcdtest.Cluster
	// kube is the API server, with etcd-druid's Role, service account
	// and leases of the reference manifest; kubeconfig is that service
	// account's, as the pods hold it.
	kube       *kube
	kubeconfig string
}

type druidMember struct {
	pod, host        string
	peerURL, client  string
	dataDir, conf    string
	server           *sidecarProc
	etcd             *embed.Etcd
	served           string // the config /config served last
	extraServerFlags []string
}

// druidNamespace is the Etcd's namespace, where etcd-druid makes the
// leases.
const druidNamespace = "shoot--p--c"

func newDruid(t *testing.T, members int) *druid {
	t.Helper()
	dir := t.TempDir()
	hosts := []string{"localhost"}
	for i := range members {
		hosts = append(hosts, fmt.Sprintf("127.0.0.%d", i+1))
	}
	sec := &etcdtest.Security{Dir: filepath.Join(dir, "security")}
	if err := os.MkdirAll(sec.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sec.CA = pki.NewCA(t, sec.Dir, "ca")
	sec.Member = sec.CA.Issue(t, "member", pki.LeafOptions{CommonName: "etcd-member", Hosts: hosts})
	sec.Client = sec.CA.Issue(t, "client", pki.LeafOptions{CommonName: "etcd-backup", ClientOnly: true})
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(sec.CA.File)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(pem)
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	d := &druid{t: t, sec: sec, caPool: pool, dir: dir, storeDir: filepath.Join(dir, "home"), port: port}
	d.kube = startKube(t, druidNamespace)
	d.kube.apply("../../deploy/kubernetes/etcd-druid.yaml", "ServiceAccount", "Role", "RoleBinding", "Lease")
	// etcd-druid's Role still grants StatefulSets and pods, which
	// etcd-backup-restore read before #1040: the sidecars here get the
	// leases alone, so no start, join or scale-up may depend on the rest.
	d.kube.kubectl(nil, "patch", "role", "druid.gardener.cloud:etcd:etcd-main", "--namespace="+druidNamespace, "--type=json",
		"-p", `[{"op":"test","path":"/rules/0/resources","value":["leases"]},{"op":"remove","path":"/rules/2"},{"op":"remove","path":"/rules/1"}]`)
	d.kubeconfig = d.kube.kubeconfig("etcd-main")
	for i := range members {
		pod := fmt.Sprintf("etcd-main-%d", i)
		peer, client, err := etcdtest.FreeURLs()
		if err != nil {
			t.Fatal(err)
		}
		host := fmt.Sprintf("127.0.0.%d", i+1)
		m := &druidMember{pod: pod, host: host, peerURL: "https://" + peer.Host,
			client: "https://" + net.JoinHostPort(host, client.Port()), dataDir: filepath.Join(dir, pod, "new.etcd")}
		d.members = append(d.members, m)
	}
	d.resize(members)
	return d
}

// resize writes every member's configuration for a cluster of the first n
// members, as etcd-druid's ConfigMap changes when the Etcd is scaled.
func (d *druid) resize(n int) {
	d.size = n
	var initial []string
	for _, m := range d.members[:n] {
		initial = append(initial, m.pod+"="+m.peerURL)
	}
	if d.source != nil {
		for _, m := range d.source.Members {
			initial = append(initial, m.Name+"="+m.PeerURL.String())
		}
	}
	d.cluster = strings.Join(initial, ",")
	for _, m := range d.members {
		d.writeConf(m)
	}
}

// writeConf writes the member's ETCD_CONF as etcd-druid's ConfigMap holds
// it, with the member's own listen URLs (etcd-druid's pods each listen on
// 0.0.0.0; here they share one host).
func (d *druid) writeConf(m *druidMember) {
	var b strings.Builder
	fmt.Fprintf(&b, "name: etcd-config\ndata-dir: %s\nmetrics: basic\nsnapshot-count: 75000\nenable-grpc-gateway: false\n", m.dataDir)
	fmt.Fprintf(&b, "quota-backend-bytes: 8589934592\ninitial-cluster-token: etcd-cluster\ninitial-cluster-state: new\ninitial-cluster: %s\n", d.cluster)
	fmt.Fprintf(&b, "auto-compaction-mode: periodic\nauto-compaction-retention: 30m\nunsafe-no-fsync: true\n")
	fmt.Fprintf(&b, "listen-peer-urls: %s\nlisten-client-urls: %s\n", m.peerURL, m.client)
	for _, key := range []string{"initial-advertise-peer-urls", "advertise-client-urls"} {
		fmt.Fprintf(&b, "%s:\n", key)
		for _, o := range d.members[:d.size] {
			u := o.peerURL
			if key == "advertise-client-urls" {
				u = o.client
			}
			fmt.Fprintf(&b, "  %s:\n  - %s\n", o.pod, u)
		}
	}
	for _, key := range []string{"client-transport-security", "peer-transport-security"} {
		fmt.Fprintf(&b, "%s:\n  cert-file: %s\n  key-file: %s\n  client-cert-auth: true\n  trusted-ca-file: %s\n  auto-tls: false\n",
			key, d.sec.Member.CertFile, d.sec.Member.KeyFile, d.sec.CA.File)
	}
	fmt.Fprintf(&b, "next-cluster-version-compatible: true\n")
	m.conf = filepath.Join(d.dir, m.pod+".conf.yaml")
	if err := os.WriteFile(m.conf, []byte(b.String()), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// serverArgs are the arguments etcd-druid's StatefulSet builder gives
// etcd-backup-restore for a cluster with client and backup TLS, a Local
// store and leases, in its order.
func (d *druid) serverArgs(m *druidMember) []string {
	data := filepath.Dir(m.dataDir)
	return append([]string{"server", fmt.Sprintf("--server-port=%d", d.port),
		"--enable-snapshot-lease-renewal=true", "--full-snapshot-lease-name=etcd-main-full-snap",
		"--delta-snapshot-lease-name=etcd-main-delta-snap",
		"--storage-provider=Local", "--store-prefix=etcd-main", "--schedule=0 */24 * * *", "--delta-snapshot-period=1s",
		"--delta-snapshot-memory-limit=104857600", "--garbage-collection-policy=LimitBased", "--max-backups=7",
		"--garbage-collection-period=1m0s", "--compress-snapshots=true", "--compression-policy=gzip", "--etcd-snapshot-timeout=15m",
		"--etcd-defrag-timeout=15m", "--auto-compaction-mode=periodic", "--auto-compaction-retention=30m",
		"--cacert=" + d.sec.CA.File, "--cert=" + d.sec.Client.CertFile, "--key=" + d.sec.Client.KeyFile,
		"--insecure-transport=false", "--insecure-skip-tls-verify=false", "--endpoints=" + m.client,
		"--service-endpoints=" + d.serviceEndpoints(),
		"--server-cert=" + d.sec.Member.CertFile, "--server-key=" + d.sec.Member.KeyFile,
		"--data-dir=" + m.dataDir, "--restoration-temp-snapshots-dir=" + filepath.Join(data, "restoration.temp"),
		"--snapstore-temp-directory=" + filepath.Join(data, "temp"), "--etcd-connection-timeout=5m", "--use-etcd-wrapper=true",
		"--enable-member-lease-renewal=true", "--k8s-heartbeat-duration=10s", "--embedded-etcd-quota-bytes=8589934592",
	}, m.extraServerFlags...)
}

// serviceEndpoints is --service-endpoints: the client Service's, and the
// source cluster's client endpoints after it.
func (d *druid) serviceEndpoints() string {
	eps := []string{d.members[0].client}
	if d.source != nil {
		eps = append(eps, d.source.Endpoints()...)
	}
	return strings.Join(eps, ",")
}

// base is the member's sidecar URL.
func (d *druid) base(m *druidMember) string {
	return "https://" + net.JoinHostPort(m.host, strconv.Itoa(d.port))
}

// startServer starts the member's etcd-backup server process with
// etcd-druid's environment.
func (d *druid) startServer(m *druidMember) {
	d.t.Helper()
	args := d.serverArgs(m)
	if d.storeless {
		args = slices.DeleteFunc(args, func(a string) bool {
			return strings.HasPrefix(a, "--storage-provider=") || strings.HasPrefix(a, "--store-prefix=")
		})
	}
	if d.storeArgs != nil {
		i := slices.Index(args, "--storage-provider=Local")
		args = slices.Insert(slices.Delete(args, i, i+1), i, d.storeArgs...)
	}
	p := &sidecarProc{name: m.pod + "-br", url: d.base(m), args: args}
	p.env = []string{"POD_NAME=" + m.pod, "POD_NAMESPACE=" + druidNamespace, "KUBECONFIG=" + d.kubeconfig,
		"ETCD_CONF=" + m.conf, "STORAGE_CONTAINER=backups",
		"HOME=" + d.storeDir, "ETCDKIT_LISTEN=" + net.JoinHostPort(m.host, strconv.Itoa(d.port))}
	p.env = append(p.env, d.env...)
	p.start(d.t)
	m.server = p
	d.t.Cleanup(func() {
		if d.t.Failed() {
			d.t.Logf("%s's log:\n%s", p.name, p.logs.String())
		}
	})
}

func (d *druid) http() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: d.caPool}}}
}

// get calls the member's sidecar as etcd-backup-restore's clients do.
func (d *druid) get(m *druidMember, path string) (int, http.Header, string) {
	d.t.Helper()
	resp, err := d.http().Get(d.base(m) + path)
	if err != nil {
		d.t.Fatalf("GET %s on %s: %v", path, m.pod, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// brWrapper is Gardener's etcd-wrapper in brief, written from its
// protocol: poll /initialization/status; on "New" ask
// /initialization/start in the mode its last exit calls for; on
// "Successful" fetch /config and start etcd from it.
func (d *druid) brWrapper(ctx context.Context, m *druidMember, mode string) error {
	d.t.Helper()
	hc := d.http()
	get := func(path string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base(m)+path, nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for {
		code, status, err := get("/initialization/status")
		if err == nil && code == http.StatusOK {
			if status == "Successful" {
				break
			}
			if status == "New" {
				if code, _, err := get("/initialization/start?mode=" + mode); err != nil || code != http.StatusOK {
					d.t.Logf("%s: start initialization: %d %v", m.pod, code, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: initialization: %w (last status %q)", m.pod, ctx.Err(), status)
		case <-time.After(200 * time.Millisecond):
		}
	}
	code, conf, err := get("/config")
	if err != nil {
		return fmt.Errorf("%s: /config: %w", m.pod, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s: /config: status %d", m.pod, code)
	}
	m.served = conf
	path := filepath.Join(d.dir, m.pod+".served.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return err
	}
	cfg, err := embed.ConfigFromFile(path)
	if err != nil {
		return fmt.Errorf("%s: the served config: %w", m.pod, err)
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("%s: start etcd: %w", m.pod, err)
	}
	m.etcd = e
	d.t.Cleanup(func() { d.stopEtcd(m) })
	return nil
}

// stopEtcd stops the member's etcd, as the wrapper's container stops.
func (d *druid) stopEtcd(m *druidMember) {
	if m.etcd != nil {
		m.etcd.Close()
		m.etcd = nil
	}
}

// client reaches the members' etcd.
func (d *druid) client(t *testing.T) etcdclient.Config {
	var eps []string
	for _, m := range d.members {
		eps = append(eps, m.client)
	}
	return etcdclient.Config{Endpoints: eps, TLS: d.sec.TLSFiles()}
}

var snapshotJSON = regexp.MustCompile(`^\{"createdOn":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)","immutabilityExpriyTime":"0001-01-01T00:00:00Z","versionID":null,"kind":"(Full|Incr)","snapDir":"","snapName":"((?:Full|Incr)-(\d{8})-(\d{8})-(\d+)\.gz(?:\.final)?)","prefix":"([^"]*)","compressionSuffix":"\.gz","startRevision":(\d+),"lastRevision":(\d+),"isChunk":false,"isFinal":(true|false)\}$`)

// checkSnapshotJSON checks one snapshot's JSON byte for byte against
// etcd-backup-restore's form, and that the name agrees with the fields.
func checkSnapshotJSON(t *testing.T, body, kind, prefix string, final bool) (start, last int64) {
	t.Helper()
	m := snapshotJSON.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("not etcd-backup-restore's snapshot JSON: %s", body)
	}
	created, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		t.Fatal(err)
	}
	if m[2] != kind || m[7] != prefix || m[10] != strconv.FormatBool(final) || m[4] != fmt.Sprintf("%08s", m[8]) ||
		m[5] != fmt.Sprintf("%08s", m[9]) || m[6] != strconv.FormatInt(created.Unix(), 10) || strings.HasSuffix(m[3], ".final") != final {
		t.Fatalf("snapshot JSON %s: want kind %s, prefix %q, final %v, and a name that agrees", body, kind, prefix, final)
	}
	start, _ = strconv.ParseInt(m[8], 10, 64)
	last, _ = strconv.ParseInt(m[9], 10, 64)
	return start, last
}

// The contract, endpoint by endpoint, on one member with TLS on its
// clients, its peers and the sidecar: what etcd-backup-restore answers
// (status code, body bytes, content type) is what etcd-backup server
// answers. Then the data dir is wiped and the same wrapper brings it back
// from the backups. The store is an S3 bucket that refuses overwrites and
// deletes (Object Lock, a day's compliance retention) and ETCDKIT_LOCK_FOR
// locks each object for two: every write goes through, retention meets
// only locks and fails none, and the restore reads the locked chain.
func TestServerContract(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, bucket := lockedBucket(t, 1)
	creds := filepath.Join(t.TempDir(), "aws.json")
	if err := os.WriteFile(creds, fmt.Appendf(nil, `{"accessKeyID":%q,"secretAccessKey":%q,"region":"us-east-1","endpoint":%q,"s3ForcePathStyle":true}`,
		srv.AccessKey, srv.SecretKey, srv.Endpoint), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDruid(t, 1)
	d.storeArgs = []string{"--storage-provider=S3", "--store-container=" + bucket}
	d.env = []string{"AWS_APPLICATION_CREDENTIALS_JSON=" + creds, "ETCDKIT_LOCK_FOR=48h"}
	m := d.members[0]
	// Retention every second, to keep one full: it meets the first, locked.
	m.extraServerFlags = []string{"--garbage-collection-period=1s", "--max-backups=1"}
	d.startServer(m)
	waitServing(t, d, m)

	code, h, body := d.get(m, "/initialization/status")
	if code != 200 || body != "New" || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Strict-Transport-Security") != "max-age=31536000" {
		t.Fatalf("status before start: %d %q %v", code, body, h)
	}
	if code, _, body := d.get(m, "/healthz"); code != 503 || body != `{"health":false}` {
		t.Fatalf("healthz before etcd runs: %d %s", code, body)
	}
	if err := d.brWrapper(ctx, m, "full"); err != nil {
		t.Fatal(err)
	}
	// The final state is read once, then the state is New again.
	if _, _, body := d.get(m, "/initialization/status"); body != "New" {
		t.Fatalf("status after the wrapper read Successful: %q", body)
	}
	for _, want := range []string{"name: etcd-main-0\n", "initial-advertise-peer-urls: " + m.peerURL + "\n",
		"advertise-client-urls: " + m.client + "\n", "initial-cluster: etcd-main-0=" + m.peerURL + "\n",
		"initial-cluster-state: new\n", "quota-backend-bytes: 8589934592\n", "  client-cert-auth: true\n"} {
		if !strings.Contains(m.served, want) {
			t.Errorf("/config lacks %q:\n%s", want, m.served)
		}
	}
	cli, err := etcdclient.New(ctx, d.client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	etcdtest.Eventually(t, "the sidecar uploads and /healthz is 200", time.Minute, func() bool {
		code, _, body := d.get(m, "/healthz")
		return code == 200 && body == `{"health":true}`
	})
	// The chain's first full is taken as the sidecar starts uploading;
	// writes after it are the delta's.
	etcdtest.Eventually(t, "the first full snapshot", time.Minute, func() bool {
		_, _, metrics := d.get(m, "/metrics")
		return strings.Contains(metrics, `etcdbr_snapshot_duration_seconds_count{kind="Full",succeeded="true"} 1`)
	})
	putMany(t, cli, 20, "contract")

	code, h, body = d.get(m, "/snapshot/delta")
	if code != 200 || h.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("/snapshot/delta: %d %s %v", code, body, h)
	}
	_, last := checkSnapshotJSON(t, body, "Incr", "", false)
	if code, _, body := d.get(m, "/snapshot/delta"); code != 200 || body != "null" {
		t.Fatalf("/snapshot/delta with nothing new: %d %q, want 200 null", code, body)
	}
	if code, _, body := d.get(m, "/snapshot/full?final=maybe"); code != 400 || body != "" {
		t.Fatalf("/snapshot/full?final=maybe: %d %q, want 400 and no body", code, body)
	}
	_, _, body = d.get(m, "/snapshot/full?final=true")
	if _, full := checkSnapshotJSON(t, body, "Full", "", true); full != last {
		t.Fatalf("the final full holds revision %d, the last delta %d", full, last)
	}
	putMany(t, cli, 5, "after-final")
	_, _, body = d.get(m, "/snapshot/delta")
	dstart, dlast := checkSnapshotJSON(t, body, "Incr", "", false)
	if dstart != last+1 {
		t.Fatalf("the delta after the final full starts at %d, want %d", dstart, last+1)
	}
	_, _, body = d.get(m, "/snapshot/latest")
	latest := regexp.MustCompile(`^\{"fullSnapshot":(\{[^}]*\}),"deltaSnapshots":\[(\{[^}]*\})\]\}$`).FindStringSubmatch(body)
	if latest == nil {
		t.Fatalf("/snapshot/latest: %s", body)
	}
	checkSnapshotJSON(t, latest[1], "Full", "etcd-main/v2/", true)
	if _, l := checkSnapshotJSON(t, latest[2], "Incr", "etcd-main/v2/", false); l != dlast {
		t.Fatalf("/snapshot/latest's delta ends at %d, want %d", l, dlast)
	}
	if code, _, body := d.get(m, "/no/such/path"); code != 404 || body != "404 page not found\n" {
		t.Fatalf("an unknown path: %d %q", code, body)
	}
	_, _, metrics := d.get(m, "/metrics")
	for _, series := range []string{`etcdbr_snapshot_latest_revision{kind="Incr"} ` + strconv.FormatInt(dlast, 10),
		`etcdbr_snapshot_duration_seconds_count{kind="Full",succeeded="true"}`, `etcdbr_validation_duration_seconds_count{succeeded="true"} 1`,
		`etcdbr_cluster_size 1`, `etcdbr_snapstore_latest_deltas_total 1`, `etcdbr_snapshot_gc_total{kind="Incr",succeeded="true"} 0`,
		`etcdkit_uploader 1`, `etcdkit_store_write_once 1`} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	etcdtest.Eventually(t, "retention meets the locked first full", time.Minute, func() bool {
		_, _, metrics := d.get(m, "/metrics")
		return regexp.MustCompile(`(?m)^etcdkit_gc_locked_total [1-9]`).MatchString(metrics)
	})
	if _, _, metrics := d.get(m, "/metrics"); regexp.MustCompile(`(?m)^etcdbr_snapshot_gc_total\{[^}]*succeeded="false"\} [1-9]`).MatchString(metrics) {
		t.Errorf("a retention run failed on the locked bucket:\n%s", grepLines(metrics, "gc"))
	}
	st, err := s3.New(ctx, s3.Config{Bucket: bucket, Prefix: "etcd-main", Endpoint: srv.Endpoint, PathStyle: true, Region: "us-east-1",
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cat.All() {
		if until, err := store.LockedUntil(ctx, st, s.Key); err != nil || time.Until(until) < 47*time.Hour {
			t.Errorf("%s is locked until %v (%v), want two days from its upload", s.Key, until, err)
		}
	}

	// The member's data dir is lost; the wrapper restarts and the
	// sidecar restores it from the chain, final full and delta.
	d.stopEtcd(m)
	if err := os.Rename(m.dataDir, m.dataDir+".lost"); err != nil {
		t.Fatal(err)
	}
	if err := d.brWrapper(ctx, m, "full"); err != nil {
		t.Fatal(err)
	}
	// Restored to the chain's last revision and bumped past it, so that
	// the API server's watches never see the revision go back.
	resp, err := cli.Get(ctx, "/fault/after-final/", clientv3.WithPrefix())
	if err != nil || resp.Count != 5 || resp.Header.Revision < dlast+restore.MinSafeBump {
		t.Fatalf("after the restore: %d keys of 5 at revision %d (want %d and a bump of at least %d), %v", resp.Count, resp.Header.Revision, dlast, restore.MinSafeBump, err)
	}
	_, _, metrics = d.get(m, "/metrics")
	if !strings.Contains(metrics, `etcdbr_restoration_duration_seconds_count{restore="single_node",succeeded="true"} 1`) {
		t.Errorf("/metrics does not count the restore:\n%s", grepLines(metrics, "etcdbr_restoration"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// waitServing waits until the member's sidecar answers.
func waitServing(t *testing.T, d *druid, m *druidMember) {
	t.Helper()
	etcdtest.Eventually(t, m.pod+"'s sidecar serves", time.Minute, func() bool {
		resp, err := d.http().Get(d.base(m) + "/initialization/status")
		if err == nil {
			_ = resp.Body.Close()
		}
		return err == nil
	})
}

// An etcd-druid cluster's life with etcd-backup server as its sidecar, TLS
// everywhere: one member bootstraps and is backed up; etcd-druid scales it
// to three, whose new members join as learners and are promoted; a
// follower's database is corrupted and it rejoins from its peers; a
// snapshot asked of a follower's sidecar is taken by the leader's; the
// backups go on all along and restore to the live keyspace.
func TestDruidClusterLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := newDruid(t, 3)
	// DEP-04's EtcdMembers, as etcd-druid would make them, with the Role
	// letting each sidecar write their status.
	d.kube.kubectl(nil, "apply", "-f", "../../deploy/kubernetes/etcdmember-crd.yaml")
	d.kube.kubectl(nil, "wait", "--for=condition=established", "--timeout=60s", "crd/etcdmembers.druid.gardener.cloud")
	d.kube.kubectl(nil, "patch", "role", "druid.gardener.cloud:etcd:etcd-main", "--namespace="+druidNamespace, "--type=json",
		"-p", `[{"op":"add","path":"/rules/-","value":{"apiGroups":["druid.gardener.cloud"],"resources":["etcdmembers","etcdmembers/status"],"verbs":["get","patch"]}}]`)
	for _, m := range d.members {
		d.kube.kubectl(fmt.Appendf(nil, "apiVersion: druid.gardener.cloud/v1alpha1\nkind: EtcdMember\nmetadata:\n  name: %s\n", m.pod), "apply", "--namespace="+druidNamespace, "-f", "-")
	}
	d.env = append(d.env, "ETCDKIT_ETCD_MEMBER_STATUS=true")
	d.resize(1)
	m0 := d.members[0]
	d.startServer(m0)
	waitServing(t, d, m0)
	if err := d.brWrapper(ctx, m0, "full"); err != nil {
		t.Fatal(err)
	}
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{m0.client}, TLS: d.sec.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	// What etcd-druid reads of a one-member cluster: a leader's member
	// lease, the first full snapshot's revision, the deltas' after it.
	d.checkMemberLeases(ctx, cli, 1)
	etcdtest.Eventually(t, "the full snapshot lease holds the first full", 10*time.Second, func() bool {
		return d.kube.revision("etcd-main-full-snap") > 0
	})
	putMany(t, cli, 50, "one")
	d.checkDeltaLease(ctx, cli)

	// Scale 1 → 3: the new pods start one after the other, as the
	// StatefulSet starts them.
	d.resize(3)
	for _, m := range d.members[1:] {
		d.startServer(m)
		waitServing(t, d, m)
		if err := d.brWrapper(ctx, m, "full"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.served, "initial-cluster-state: existing\n") {
			t.Fatalf("%s joined with:\n%s", m.pod, m.served)
		}
		waitVoters(t, ctx, cli, d.members[:slices.Index(d.members, m)+1])
	}
	d.checkMemberLeases(ctx, cli, 3)
	d.checkEtcdMembers(ctx, cli)
	putMany(t, cli, 50, "three")
	// etcd-druid's BackupReady, read as its reconciler reads it, again and
	// again: the delta lease within two delta periods (1 s each here).
	for range 12 {
		if err := d.kube.backupReady("etcd-main-full-snap", "etcd-main-delta-snap", time.Second, 24*time.Hour); err != nil {
			t.Fatalf("BackupReady would be false: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// A follower's database is corrupted; its wrapper restarts it and the
	// sidecar moves the data dir aside and rejoins it as a learner (its
	// second add, after the scale-up's).
	follower := d.follower(t, ctx, cli)
	d.stopEtcd(follower)
	if err := os.Truncate(filepath.Join(follower.dataDir, "member", "snap", "db"), 10000); err != nil {
		t.Fatal(err)
	}
	if err := d.brWrapper(ctx, follower, "full"); err != nil {
		t.Fatal(err)
	}
	waitVoters(t, ctx, cli, d.members)
	// The rejoined member is a new member: its lease and its EtcdMember
	// name its new ID.
	d.checkMemberLeases(ctx, cli, 3)
	d.checkEtcdMembers(ctx, cli)
	putMany(t, cli, 50, "rejoined")
	_, _, metrics := d.get(follower, "/metrics")
	if !strings.Contains(metrics, `etcdbr_restoration_duration_seconds_count{restore="single_member",succeeded="true"} 1`) ||
		!strings.Contains(metrics, `etcdbr_add_learner_duration_seconds_count{succeeded="true"} 2`) {
		t.Errorf("%s's metrics do not count the rejoin:\n%s", follower.pod, grepLines(metrics, "etcdbr_"))
	}

	// A snapshot asked of a follower's sidecar is the leader's to take.
	follower = d.follower(t, ctx, cli)
	code, _, body := d.get(follower, "/snapshot/full")
	if code != 200 {
		t.Fatalf("/snapshot/full on %s: %d %q", follower.pod, code, body)
	}
	_, full := checkSnapshotJSON(t, body, "Full", "", false)
	resp, err := cli.Get(ctx, "/fault/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 150 || full != resp.Header.Revision {
		t.Fatalf("the full holds revision %d; the cluster %d keys at %d, %v", full, resp.Count, resp.Header.Revision, err)
	}
	if code, _, body := d.get(follower, "/healthz"); code != 503 || body != `{"health":false}` {
		t.Fatalf("a follower's sidecar's healthz: %d %s", code, body)
	}

	// etcd-druid's compaction Job folds the chain into a new full.
	putMany(t, cli, 30, "before-compaction")
	if code, _, _ := d.get(follower, "/snapshot/delta"); code != 200 {
		t.Fatalf("/snapshot/delta on %s: %d", follower.pod, code)
	}
	env := []string{"HOME=" + d.storeDir, "POD_NAMESPACE=" + druidNamespace, "KUBECONFIG=" + d.kubeconfig}
	jobDir := t.TempDir()
	out := ok(t, env, "compact", "--data-dir="+filepath.Join(jobDir, "compaction.etcd"),
		"--restoration-temp-snapshots-dir="+filepath.Join(jobDir, "compaction.restoration.temp"),
		"--snapstore-temp-directory="+filepath.Join(jobDir, "tmp"), "--metrics-scrape-wait-duration=0s",
		"--enable-snapshot-lease-renewal=true", "--full-snapshot-lease-name=etcd-main-full-snap",
		"--delta-snapshot-lease-name=etcd-main-delta-snap", "--embedded-etcd-quota-bytes=8589934592",
		"--storage-provider=Local", "--store-prefix=etcd-main", "--store-container=backups")
	if !strings.Contains(out, "new full snapshot") {
		t.Fatalf("compact: %s", out)
	}
	// The Job writes the new full to its lease, so etcd-druid counts no
	// revisions since it, and starts no other Job.
	compacted := regexp.MustCompile(`revision\s+(\d+)`).FindStringSubmatch(out)
	if compacted == nil || strconv.FormatInt(d.kube.revision("etcd-main-full-snap"), 10) != compacted[1] {
		t.Fatalf("after compaction the full snapshot lease holds %s; compact said:\n%s", d.kube.holder("etcd-main-full-snap"), out)
	}
	if since := d.kube.revision("etcd-main-delta-snap") - d.kube.revision("etcd-main-full-snap"); since > 0 {
		t.Fatalf("etcd-druid would count %d revisions since the compacted full", since)
	}

	// Its copy-backups Job moves the backups once the final full is there.
	putMany(t, cli, 10, "last")
	if code, _, body := d.get(follower, "/snapshot/full?final=true"); code != 200 || !strings.Contains(body, `"isFinal":true`) {
		t.Fatalf("the final full: %d %s", code, body)
	}
	ok(t, env, "copy", "--snapstore-temp-directory="+filepath.Join(jobDir, "tmp"), "--storage-provider=Local",
		"--store-prefix=etcd-main", "--store-container=copied", "--source-storage-provider=Local", "--source-store-prefix=etcd-main",
		"--source-store-container=backups", "--max-backups-to-copy=2", "--wait-for-final-snapshot=true",
		"--wait-for-final-snapshot-timeout=1m")
	copied, err := filepath.Glob(filepath.Join(d.storeDir, "copied", "etcd-main", "v2", "*"))
	if err != nil || len(copied) < 2 || slices.ContainsFunc(copied, func(p string) bool { return strings.HasSuffix(p, ".final") }) {
		t.Fatalf("the copy holds %v, %v: want two chains, no .final", copied, err)
	}
	live, err := cli.Get(ctx, "/fault/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	ok(t, nil, "restore", "--store", "file://"+filepath.Join(d.storeDir, "copied", "etcd-main"), "--data-dir", restored,
		"--name", "r0", "--peer-urls", "http://127.0.0.1:2390")
	peer, _ := url.Parse("http://127.0.0.1:2390")
	rc := etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true}, "r0", restored, *peer)
	got, err := rc.Client(t).Get(ctx, "/fault/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || got.Count != live.Count || got.Header.Revision != live.Header.Revision {
		t.Fatalf("restored from the copy: %d keys at %d, live %d at %d, %v", got.Count, got.Header.Revision, live.Count, live.Header.Revision, err)
	}
}

// checkEtcdMembers waits until every member's EtcdMember names its ID and
// its role, as the cluster lists them, within a heartbeat (10 s here).
func (d *druid) checkEtcdMembers(ctx context.Context, cli *clientv3.Client) {
	d.t.Helper()
	var got string
	etcdtest.Eventually(d.t, "the EtcdMembers name each member's ID and role", 15*time.Second, func() bool {
		list, err := cli.MemberList(ctx)
		if err != nil {
			return false
		}
		st, err := cli.Status(ctx, d.members[0].client)
		if err != nil {
			return false
		}
		got = d.kube.kubectl(nil, "get", "etcdmembers", "--namespace="+druidNamespace, "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.id}/{.status.transitions[-1:].subState} {end}`)
		for _, m := range list.Members {
			role := "Follower"
			if m.ID == st.Leader {
				role = "Leader"
			}
			if !strings.Contains(got, fmt.Sprintf("%s=%x/%s ", m.Name, m.ID, role)) {
				return false
			}
		}
		return true
	})
	d.t.Logf("kubectl get etcdmembers:\n%s", d.kube.kubectl(nil, "get", "etcdmembers", "--namespace="+druidNamespace, "-o", "wide"))
}

// checkMemberLeases waits until the member leases of the first n members
// say what etcd-druid needs: one leader, every member of the cluster by
// its ID, the cluster's ID, and TLS on the peer URLs.
func (d *druid) checkMemberLeases(ctx context.Context, cli *clientv3.Client, n int) {
	d.t.Helper()
	var names []string
	for _, m := range d.members[:n] {
		names = append(names, m.pod)
	}
	var last string
	// Renewed every --k8s-heartbeat-duration: 10 s.
	etcdtest.Eventually(d.t, fmt.Sprintf("the member leases of %v name the cluster", names), 30*time.Second, func() bool {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return false
		}
		roles, cluster := d.kube.members(names...)
		leaders := 0
		for _, m := range resp.Members {
			switch roles[fmt.Sprintf("%x", m.ID)] {
			case "Leader":
				leaders++
			case "":
				// A lease names a member the cluster no longer has.
				return false
			}
		}
		for _, name := range names {
			if l := d.kube.lease(name); l == nil || l.Annotations[heartbeat.TLSAnnotation] != "true" {
				return false
			}
		}
		last = fmt.Sprintf("roles %v of cluster %s", roles, cluster)
		return len(roles) == n && len(resp.Members) == n && leaders == 1 && cluster == fmt.Sprintf("%x", resp.Header.ClusterId)
	})
	d.t.Logf("member leases: %s", last)
}

// checkDeltaLease waits until the delta snapshot lease holds the
// cluster's revision.
func (d *druid) checkDeltaLease(ctx context.Context, cli *clientv3.Client) {
	d.t.Helper()
	resp, err := cli.Get(ctx, "/fault/", clientv3.WithCountOnly())
	if err != nil {
		d.t.Fatal(err)
	}
	etcdtest.Eventually(d.t, fmt.Sprintf("the delta snapshot lease reaches revision %d", resp.Header.Revision), 10*time.Second, func() bool {
		return d.kube.revision("etcd-main-delta-snap") >= resp.Header.Revision
	})
}

// follower is a member whose etcd runs and does not lead.
func (d *druid) follower(t *testing.T, ctx context.Context, cli *clientv3.Client) *druidMember {
	t.Helper()
	for _, m := range d.members[:d.size] {
		if m.etcd == nil {
			continue
		}
		st, err := cli.Status(ctx, m.client)
		if err == nil && st.Leader != st.Header.MemberId {
			return m
		}
	}
	t.Fatal("no follower runs")
	return nil
}

// waitVoters waits until the members listed are the cluster's voters.
func waitVoters(t *testing.T, ctx context.Context, cli *clientv3.Client, members []*druidMember) {
	t.Helper()
	etcdtest.Eventually(t, fmt.Sprintf("the cluster has %d voters", len(members)), time.Minute, func() bool {
		list, err := cli.MemberList(ctx)
		if err != nil || len(list.Members) != len(members) {
			return false
		}
		for _, m := range list.Members {
			if m.IsLearner || m.Name == "" {
				return false
			}
		}
		return true
	})
}

// An Etcd with bootstrapWithExistingCluster (etcd-druid#1364): its
// ConfigMap's initial-cluster lists its members and, after them, the
// source cluster's; its sidecar's --service-endpoints hold the source's
// client endpoints. Its member finds the source cluster running without
// it, joins it as a learner over TLS, /config answers
// initial-cluster-state existing with the source's members, and the
// member is promoted and holds the source's keys.
func TestServerBootstrapsWithAnExistingCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := newDruid(t, 1)
	// The source: three members of another operator, with TLS from the
	// CA the target's pods trust.
	d.source = etcdtest.Start(t, etcdtest.Options{Members: 3, TLS: true, Security: d.sec, UnsafeNoFsync: true})
	src := d.source.Client(t)
	putMany(t, src, 30, "source")
	d.resize(1)
	m := d.members[0]
	d.startServer(m)
	waitServing(t, d, m)
	if err := d.brWrapper(ctx, m, "full"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.served, "initial-cluster-state: existing\n") {
		t.Fatalf("the target member joined with:\n%s", m.served)
	}
	for _, sm := range d.source.Members {
		if !strings.Contains(m.served, sm.Name+"="+sm.PeerURL.String()) {
			t.Fatalf("/config's initial-cluster lacks source member %s:\n%s", sm.Name, m.served)
		}
	}
	etcdtest.Eventually(t, "the target member is a voter of the source cluster", time.Minute, func() bool {
		list, err := src.MemberList(ctx)
		if err != nil || len(list.Members) != 4 {
			return false
		}
		for _, lm := range list.Members {
			if lm.IsLearner || lm.Name == "" {
				return false
			}
		}
		return true
	})
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{m.client}, TLS: d.sec.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.Get(ctx, "/fault/source/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 30 {
		t.Fatalf("the target member holds %d of the source's 30 keys, %v", resp.Count, err)
	}
	_, _, metrics := d.get(m, "/metrics")
	if !strings.Contains(metrics, `etcdbr_add_learner_duration_seconds_count{succeeded="true"} 1`) {
		t.Errorf("the sidecar does not count its learner add:\n%s", grepLines(metrics, "etcdbr_add_learner"))
	}
}

// An Etcd without a backup store still runs the sidecar: it initializes
// the data dir and serves /config, answers 405 to snapshot calls as
// etcd-backup-restore without a snapshotter does, and its /healthz is 200
// beside the leader.
func TestServerWithoutStore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := newDruid(t, 1)
	d.storeless = true
	m := d.members[0]
	d.startServer(m)
	waitServing(t, d, m)
	if err := d.brWrapper(ctx, m, "full"); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "/healthz is 200 beside the leader", time.Minute, func() bool {
		code, _, body := d.get(m, "/healthz")
		return code == 200 && body == `{"health":true}`
	})
	for _, path := range []string{"/snapshot/full", "/snapshot/delta", "/snapshot/latest"} {
		if code, _, body := d.get(m, path); code != 405 || body != "" {
			t.Errorf("%s without a store: %d %q, want 405 and no body", path, code, body)
		}
	}
	if !strings.Contains(m.server.logs.String(), "no --storage-provider: no backups") {
		t.Errorf("the sidecar does not say it takes no backups:\n%s", m.server.logs.String())
	}
}

// A member whose peer URL changed in etcd-druid's configuration (a new
// peer service name, TLS turned on) starts with the new one; its sidecar
// then corrects the member in the cluster and asks the etcd-wrapper
// beside it (POST /stop on port 9095, with the member's client scheme) to
// restart etcd, as etcd-backup-restore does.
func TestServerUpdatesChangedPeerURLs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := newDruid(t, 1)
	m := d.members[0]
	d.startServer(m)
	waitServing(t, d, m)
	if err := d.brWrapper(ctx, m, "full"); err != nil {
		t.Fatal(err)
	}
	d.stopEtcd(m)
	if err := m.server.term(t); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(m.peerURL)
	if err != nil {
		t.Fatal(err)
	}
	m.peerURL = "https://" + net.JoinHostPort("localhost", u.Port())
	d.resize(1)

	// etcd-wrapper's own endpoint, where it is asked to stop etcd.
	stops := make(chan string, 4)
	wrapperAPI := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stops <- r.Method + " " + r.URL.Path
	}), ReadHeaderTimeout: 5 * time.Second}
	ln, listenErr := net.Listen("tcp", "127.0.0.1:9095")
	if listenErr == nil {
		go func() { _ = wrapperAPI.ServeTLS(ln, d.sec.Member.CertFile, d.sec.Member.KeyFile) }()
		defer func() { _ = wrapperAPI.Close() }()
	} else {
		t.Logf("port 9095 is taken (%v): the wrapper's restart is not checked", listenErr)
	}

	d.startServer(m)
	waitServing(t, d, m)
	if err := d.brWrapper(ctx, m, "sanity"); err != nil {
		t.Fatal(err)
	}
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{m.client}, TLS: d.sec.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	etcdtest.Eventually(t, "the member's peer URL is "+m.peerURL, time.Minute, func() bool {
		list, err := cli.MemberList(ctx)
		return err == nil && len(list.Members) == 1 && slices.Equal(list.Members[0].PeerURLs, []string{m.peerURL})
	})
	if listenErr == nil {
		select {
		case got := <-stops:
			if got != "POST /stop" {
				t.Fatalf("the wrapper was asked %s, want POST /stop", got)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the wrapper was not asked to restart etcd")
		}
	}
}

// Item: a compat server run by hand, without ETCD_CONF, takes its member
// from its flags; their defaults (http://localhost:2380) are no word on
// the member's peer URLs, which stay as the cluster has them.
func TestServerWithoutEtcdConfLeavesPeerURLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	cli := c.Client(t)
	before, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	sec := c.Security
	p := &sidecarProc{name: "server", url: fmt.Sprintf("http://127.0.0.1:%d", port), args: []string{"server",
		fmt.Sprintf("--server-port=%d", port), "--storage-provider=Local", "--store-prefix=p", "--delta-snapshot-period=1s",
		"--endpoints=" + c.Endpoints()[0], "--insecure-transport=false", "--insecure-skip-tls-verify=false", "--cacert=" + sec.CA.File, "--cert=" + sec.Client.CertFile, "--key=" + sec.Client.KeyFile,
		"--data-dir=" + c.Members[0].Dir, "--enable-profiling",
		"--secondary-backup-sync-enabled", "--secondary-storage-provider=Local", "--secondary-store-container=second", "--secondary-backup-sync-period=1h",
		"--secondary-retention=limit-based:max-fulls=1,delta-retention=1s"}}
	p.env = []string{"HOME=" + home, "ETCD_CONF=", "ETCDKIT_LISTEN=" + fmt.Sprintf("127.0.0.1:%d", port)}
	p.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server's log:\n%s", p.logs.String())
		}
	})
	// A delta on the store: the server knows its member, and would have
	// corrected its peer URLs by now.
	cli2 := &http.Client{Timeout: 10 * time.Second}
	etcdtest.Eventually(t, "the server takes a delta", time.Minute, func() bool {
		if _, err := cli.Put(ctx, "/k", "v"); err != nil {
			t.Fatal(err)
		}
		resp, err := cli2.Get(p.url + "/snapshot/latest")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return strings.Contains(string(b), `"kind":"Incr"`)
	})
	// The second site (a Local one, under the same home) gets the deltas
	// too.
	etcdtest.Eventually(t, "the second site holds a delta", time.Minute, func() bool {
		deltas, _ := filepath.Glob(filepath.Join(home, "second", "v2", "Incr-*"))
		return len(deltas) > 0
	})
	// etcdkit's own --secondary-retention: the second site keeps its
	// newest full alone, the first every one.
	for range 2 {
		resp, err := cli2.Get(p.url + "/snapshot/full")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	etcdtest.Eventually(t, "the second site keeps one full of three", time.Minute, func() bool {
		second, _ := filepath.Glob(filepath.Join(home, "second", "v2", "Full-*"))
		written := regexp.MustCompile(`full snapshot written" key=v2/(\S+)`).FindAllStringSubmatch(p.logs.String(), -1)
		return len(second) == 1 && len(written) >= 3 && filepath.Base(second[0]) == written[len(written)-1][1]
	})
	after, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after.Members[0].PeerURLs, before.Members[0].PeerURLs) {
		t.Fatalf("the member's peer URLs were changed from %v to %v", before.Members[0].PeerURLs, after.Members[0].PeerURLs)
	}
	if strings.Contains(p.logs.String(), "peer URLs changed") {
		t.Fatalf("the server set out to change the peer URLs:\n%s", p.logs.String())
	}
	// --enable-profiling: the profiles as openly as etcd-backup-restore
	// serves them, but not the command line, which holds --etcd-password
	// where one is given.
	for path, want := range map[string]int{"/debug/pprof/": http.StatusOK, "/debug/pprof/heap": http.StatusOK, "/debug/pprof/cmdline": http.StatusNotFound} {
		resp, err := cli2.Get(p.url + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %s, want %d", path, resp.Status, want)
		}
	}
}
