package upgrade_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/upgrade"
)

func finding(t *testing.T, r upgrade.Report, check, subject string) upgrade.Finding {
	t.Helper()
	for _, f := range r.Findings {
		if f.Check == check && strings.Contains(f.Subject, subject) {
			return f
		}
	}
	t.Fatalf("no %s finding about %q in %+v", check, subject, r.Findings)
	return upgrade.Finding{}
}

// copyEtcd35 is a data dir etcd 3.5 wrote (validate's testdata).
func copyEtcd35(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../validate/testdata/etcd35")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editMembers changes the v3 store's membership of a stopped member's
// database, as the long-fixed bugs behind etcd's zombie members left it.
func editMembers(t *testing.T, dir string, f func(b *bolt.Bucket) error) {
	t.Helper()
	editBucket(t, dir, "members", f)
}

// editBucket changes a bucket of a stopped member's database.
func editBucket(t *testing.T, dir, bucket string, f func(b *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "member", "snap", "db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if err := db.Update(func(tx *bolt.Tx) error { return f(tx.Bucket([]byte(bucket))) }); err != nil {
		t.Fatal(err)
	}
}

// A data dir etcd 3.5 wrote: its v2 membership (raft snapshot and log)
// and its v3 store's agree; a member the v3 store lists and v2 does not
// is a zombie, and one only v2 lists would be lost: both are to fix
// first. A data dir does not tell its patch release, so at best the
// verdict is unknown. The fixture is etcd-backup-restore's restore of an
// etcd 3.7 backup, whose storage version (3.7) etcd 3.6 refuses: the
// step is to fix first until the storage version is etcd 3.5's (none).
func TestDataDirZombies(t *testing.T) {
	ctx := t.Context()
	dir := copyEtcd35(t)
	o := upgrade.Options{Configured: true, Freelist: "array"}
	r, err := upgrade.DataDir(ctx, dir, "", o)
	if err != nil {
		t.Fatal(err)
	}
	if f := finding(t, r, upgrade.CheckStep, "data dir"); f.Status != upgrade.Fail || r.Verdict != upgrade.FixFirst || r.From != "3.5" || r.To != "3.6" ||
		!strings.Contains(f.Detail, "its storage version is 3.7, newer than etcd 3.6's") {
		t.Fatalf("a 3.7 backup etcd 3.5 restored: %s %+v", r.Verdict, r.Findings)
	}
	editBucket(t, dir, "meta", func(b *bolt.Bucket) error { return b.Delete([]byte("storageVersion")) })
	r, err = upgrade.DataDir(ctx, dir, "", o)
	if err != nil {
		t.Fatal(err)
	}
	if f := finding(t, r, upgrade.CheckStep, "data dir"); f.Status != upgrade.Pass || !strings.Contains(f.Detail, "which etcd 3.6 starts on") {
		t.Fatalf("etcd 3.5's data for 3.6: %+v", f)
	}
	if f := finding(t, r, upgrade.CheckZombies, "data dir"); f.Status != upgrade.Pass || r.Verdict != upgrade.Unknown {
		t.Fatalf("etcd 3.5's own data dir: %s %+v", r.Verdict, r.Findings)
	}
	// A check changes nothing: etcd's own loader would remove a temporary
	// database and rename a snap file it cannot read.
	snapDir := filepath.Join(dir, "member", "snap")
	for name, data := range map[string]string{"db.tmp.1": "partial", "00000000000000ff-00000000000fffff.snap": "garbage"} {
		if err := os.WriteFile(filepath.Join(snapDir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := upgrade.DataDir(ctx, dir, "", o); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db.tmp.1", "00000000000000ff-00000000000fffff.snap"} {
		if _, err := os.Stat(filepath.Join(snapDir, name)); err != nil {
			t.Fatalf("the check changed the data dir: %v", err)
		}
	}
	var own string
	editMembers(t, dir, func(b *bolt.Bucket) error {
		k, _ := b.Cursor().First()
		own = string(k)
		m, _ := json.Marshal(map[string]any{"id": 0xabc, "peerURLs": []string{"http://10.0.0.9:2380"}, "name": "removed-long-ago"})
		return b.Put([]byte("abc"), m)
	})
	r, err = upgrade.DataDir(ctx, dir, "", o)
	if err != nil {
		t.Fatal(err)
	}
	f := finding(t, r, upgrade.CheckZombies, "data dir")
	if f.Status != upgrade.Fail || r.Verdict != upgrade.FixFirst || !strings.Contains(f.Detail, "abc (removed-long-ago)") || !strings.Contains(f.Fix, "3.5.26") {
		t.Fatalf("a zombie in the v3 store: %s %+v", r.Verdict, f)
	}
	editMembers(t, dir, func(b *bolt.Bucket) error {
		if err := b.Delete([]byte("abc")); err != nil {
			return err
		}
		return b.Delete([]byte(own))
	})
	r, err = upgrade.DataDir(ctx, dir, "", o)
	if err != nil {
		t.Fatal(err)
	}
	if f := finding(t, r, upgrade.CheckZombies, "data dir"); f.Status != upgrade.Fail || !strings.Contains(f.Detail, "3.6 would lose them") {
		t.Fatalf("a member only the v2 store lists: %+v", f)
	}
}

// A database that is no file to open, or an empty one, is an error that
// says so: bbolt would block on a FIFO and initialise an empty file.
func TestDataDirNotADatabase(t *testing.T) {
	for name, make := range map[string]func(string) error{
		"is empty":              func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"is not a regular file": func(p string) error { return syscall.Mkfifo(p, 0o600) },
	} {
		dir := copyEtcd35(t)
		db := filepath.Join(dir, "member", "snap", "db")
		if err := os.Remove(db); err != nil {
			t.Fatal(err)
		}
		if err := make(db); err != nil {
			t.Fatal(err)
		}
		if _, err := upgrade.DataDir(t.Context(), dir, "", upgrade.Options{}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("a database that %s: %v", name, err)
		}
	}
}

// A live etcd 3.5.35 over TLS: its version passes, its member list (the v2
// membership) and the database streamed from it (v3) agree; with
// etcd-druid's freelist the step is safe, without it advised.
func TestLiveEtcd35(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Reserve(t, etcdtest.Options{TLS: true})
	sec := c.Security
	s := emulator.RequireEtcd(t, emulator.Etcd35, emulator.EtcdOptions{CA: sec.CA.File, Cert: sec.Member.CertFile, Key: sec.Member.KeyFile,
		ClientCert: sec.Client.CertFile, ClientKey: sec.Client.KeyFile})
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{s.Etcd.ClientURL}, TLS: sec.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	r, err := upgrade.Live(ctx, cli, upgrade.LiveOptions{Step: upgrade.Options{Configured: true, Freelist: "array"}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if v := finding(t, r, upgrade.CheckVersion, "member"); v.Status != upgrade.Pass || v.Detail != "etcd "+s.Etcd.Version {
		t.Fatalf("the version of etcd %s: %+v", s.Etcd.Version, v)
	}
	if z := finding(t, r, upgrade.CheckZombies, "cluster"); z.Status != upgrade.Pass || !strings.Contains(z.Detail, "the same 1 members") {
		t.Fatalf("zombies of etcd %s: %+v", s.Etcd.Version, z)
	}
	if r.Verdict != upgrade.Safe {
		t.Fatalf("etcd %s with the array freelist: %s %+v", s.Etcd.Version, r.Verdict, r.Findings)
	}
	r, err = upgrade.Live(ctx, cli, upgrade.LiveOptions{Step: upgrade.Options{Configured: true}, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if f := finding(t, r, upgrade.CheckFreelist, "configuration"); f.Status != upgrade.Advice || r.Verdict != upgrade.Safe {
		t.Fatalf("a configuration without the freelist key: %s %+v", r.Verdict, f)
	}
}

// A member that does not answer is unread, never fine: the verdict is
// unknown, and names it.
func TestLiveMemberDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, TLS: true, UnsafeNoFsync: true})
	down := c.Members[2]
	down.Stop()
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{c.Members[0].ClientURL.String()}, TLS: c.Security.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	r, err := upgrade.Live(ctx, cli, upgrade.LiveOptions{Step: upgrade.Options{Configured: true, Freelist: "array"}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if f := finding(t, r, upgrade.CheckVersion, down.Name); f.Status != upgrade.Unread || r.Verdict != upgrade.Unknown {
		t.Fatalf("a member down: %s %+v", r.Verdict, r.Findings)
	}
	// Another etcd at its client URL does not speak for it.
	imp := embed.NewConfig()
	imp.Name, imp.Dir, imp.LogLevel = "impostor", t.TempDir(), "error"
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	imp.ListenPeerUrls, imp.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	imp.ListenClientUrls, imp.AdvertiseClientUrls = []url.URL{down.ClientURL}, []url.URL{down.ClientURL}
	imp.InitialCluster = "impostor=" + peer.String()
	sec := c.Security
	imp.ClientTLSInfo = transport.TLSInfo{CertFile: sec.Member.CertFile, KeyFile: sec.Member.KeyFile, TrustedCAFile: sec.CA.File, ClientCertAuth: true}
	e, err := embed.StartEtcd(imp)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-ctx.Done():
		t.Fatal("the impostor did not start")
	}
	r, err = upgrade.Live(ctx, cli, upgrade.LiveOptions{Step: upgrade.Options{Configured: true, Freelist: "array"}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if f := finding(t, r, upgrade.CheckVersion, down.Name); f.Status != upgrade.Unread || !strings.Contains(f.Detail, "not as this one") || r.Verdict != upgrade.Unknown {
		t.Fatalf("another etcd at a stopped member's URL: %s %+v", r.Verdict, f)
	}
	// The others run this module's etcd, past 3.6: nothing else to fix.
	for _, f := range r.Findings {
		if f.Status == upgrade.Fail {
			t.Fatalf("a failed finding on a 3.7 cluster: %+v", f)
		}
	}
}

// A downgrade left enabled blocks every step but its own: etcd raises no
// cluster version while it is, and ends it only once every member runs
// its target. etcd 3.6 tells it in its status, etcd 3.5 only in its
// database, and a stopped member's data dir keeps it.
func TestPendingDowngrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	sec := etcdtest.Reserve(t, etcdtest.Options{TLS: true}).Security
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	start := func(kind emulator.Kind, args ...string) (*emulator.Server, *clientv3.Client) {
		t.Helper()
		s := emulator.RequireEtcd(t, kind, emulator.EtcdOptions{CA: sec.CA.File, Cert: sec.Member.CertFile, Key: sec.Member.KeyFile,
			ClientCert: sec.Client.CertFile, ClientKey: sec.Client.KeyFile, DataDir: data, PeerURL: peer.String(), Args: args})
		cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{s.Etcd.ClientURL}, TLS: sec.TLSFiles()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		return s, cli
	}
	check := func(cli *clientv3.Client, to string) upgrade.Report {
		t.Helper()
		r, err := upgrade.Live(ctx, cli, upgrade.LiveOptions{Step: upgrade.Options{To: etcdversion.MustParse(to), Configured: true, Freelist: "array"}, WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	pending := func(r upgrade.Report, subject string) {
		t.Helper()
		f := finding(t, r, upgrade.CheckDowngrade, subject)
		if f.Status != upgrade.Fail || !strings.Contains(f.Detail, "a downgrade to 3.5 is enabled") || r.Verdict != upgrade.FixFirst {
			t.Fatalf("%s with a downgrade to 3.5 enabled: %s %+v", r.Source, r.Verdict, r.Findings)
		}
	}

	s36, cli := start(emulator.Etcd36)
	if r := check(cli, "3.7"); r.Verdict != upgrade.Safe {
		t.Fatalf("etcd 3.6 before any downgrade, up to 3.7: %s %+v", r.Verdict, r.Findings)
	}
	for _, op := range []clientv3.DowngradeAction{clientv3.DowngradeValidate, clientv3.DowngradeEnable} {
		if _, err := cli.Downgrade(ctx, op, "3.5"); err != nil {
			t.Fatalf("downgrade %v 3.5: %v", op, err)
		}
	}
	pending(check(cli, "3.7"), "cluster")
	if r := check(cli, "3.5"); len(findings(r, upgrade.CheckDowngrade)) != 0 {
		t.Fatalf("the step down to the downgrade's target has no downgrade finding: %+v", r.Findings)
	}
	etcdtest.Eventually(t, "the storage migrated to 3.5", time.Minute, func() bool {
		st, err := cli.Status(ctx, s36.Etcd.ClientURL)
		return err == nil && st.StorageVersion == "3.5.0"
	})
	s36.Stop()

	// etcd 3.5 ends the downgrade once every member runs 3.5, on a timer
	// this member is given an hour of.
	s35, cli := start(emulator.Etcd35, "--experimental-downgrade-check-time=1h")
	pending(check(cli, "3.6"), "cluster")
	s35.Stop()

	r, err := upgrade.DataDir(ctx, data, "", upgrade.Options{To: etcdversion.MustParse("3.6"), Configured: true, Freelist: "array"})
	if err != nil {
		t.Fatal(err)
	}
	pending(r, "data dir")
}

func findings(r upgrade.Report, check string) []upgrade.Finding {
	var out []upgrade.Finding
	for _, f := range r.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}
