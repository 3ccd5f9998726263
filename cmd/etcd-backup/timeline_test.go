package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/store"
)

// timelines is what list -o json says.
type timelines struct {
	Chains    []api.ChainView    `json:"chains"`
	Timelines []api.TimelineView `json:"timelines"`
}

func listTimelines(t *testing.T, storeURL string) timelines {
	t.Helper()
	var out timelines
	if err := json.Unmarshal([]byte(ok(t, nil, "list", "--store", storeURL, "-o", "json")), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// newest is the last revision of the newest timeline's newest chain.
func (l timelines) newest() int64 {
	tl := l.Timelines[len(l.Timelines)-1].ID
	last := int64(0)
	for _, c := range l.Chains {
		if c.Timeline == tl {
			last = c.LastRevision
		}
	}
	return last
}

// writes puts n keys under /fault/<tag>/ and returns the last revision.
func writes(t *testing.T, cli *clientv3.Client, n int, tag string) int64 {
	t.Helper()
	putMany(t, cli, n, tag)
	resp, err := cli.Get(t.Context(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// saysRevision says whether restore's table says it restored revision rev.
func saysRevision(out string, rev int64) bool {
	return regexp.MustCompile(fmt.Sprintf(`(?m)^revision +%d$`, rev)).MatchString(out)
}

// restoredMember restores the store (extra: restore's flags) and starts a
// member on it with sec's certificates and users.
func restoredMember(t *testing.T, storeURL string, sec *etcdtest.Security, extra ...string) *etcdtest.Cluster {
	t.Helper()
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	dir := filepath.Join(t.TempDir(), "restored")
	ok(t, nil, append([]string{"restore", "--store", storeURL, "--data-dir", dir, "--name", "r0", "--peer-urls", peer.String()}, extra...)...)
	return etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true, Security: sec}, "r0", dir, peer)
}

// The incident of a point-in-time restore, as an operator runs it with the
// built binaries, TLS and authentication on: a chain ends at the cluster's
// last revision; the cluster is restored to the middle of it (restore
// bumps the revision past the store's backups), and serve runs beside the
// restored member on the same prefix while it writes. The sidecar begins a
// new timeline with a full snapshot of its own and never appends to the
// old chain; verify --against finds the newest timeline equal to the live
// cluster; etcd-backup-restore's rule, which knows no timelines, restores
// the live cluster too; list shows where it forked; and the old timeline's
// head still restores exactly to the old cluster's last state.
func TestPointInTimeRestoreForksTheHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	old, oldConn := secureMember(t)
	storeURL := "file://" + t.TempDir()
	p := startServe(t, oldConn, storeURL)
	uploading(t, p)
	cli := old.Client(t)
	one := func(c *clientv3.Client, n int, tag string) (last int64) {
		for i := range n {
			resp, err := c.Put(ctx, fmt.Sprintf("/%s/%05d", tag, i), tag)
			if err != nil {
				t.Fatal(err)
			}
			last = resp.Header.Revision
		}
		return last
	}
	mid := one(cli, 150, "old-a")
	end := one(cli, 71, "old-b")
	etcdtest.Eventually(t, "the chain reaches the old cluster's end", 30*time.Second, func() bool { return listTimelines(t, storeURL).newest() >= end })
	if err := p.term(t); err != nil {
		t.Fatal(err)
	}
	oldHead, err := history.LiveDigest(ctx, cli, end)
	if err != nil {
		t.Fatal(err)
	}
	sec := old.Security
	old.Close()

	r := restoredMember(t, storeURL, sec, "--revision", fmt.Sprint(mid))
	rConn := append([]string{"--endpoints", r.Endpoints()[0]}, connFlags(r.Security, "backup")...)
	rcli := r.Client(t)
	if resp, err := rcli.Get(ctx, "\x00", clientv3.WithCountOnly()); err != nil || resp.Header.Revision <= end {
		t.Fatalf("the restored cluster starts at revision %v (%v), not past the store's %d", resp.Header.Revision, err, end)
	}
	p2 := startServe(t, rConn, storeURL)
	uploading(t, p2)
	last := one(rcli, 80, "new")
	etcdtest.Eventually(t, "the new timeline reaches the restored cluster's end", 30*time.Second, func() bool { return listTimelines(t, storeURL).newest() >= last })
	// Deltas after the new timeline's full, for etcd-backup-restore's rule
	// to replay.
	last = one(rcli, 40, "newer")
	etcdtest.Eventually(t, "the new timeline's deltas reach the restored cluster's end", 30*time.Second, func() bool { return listTimelines(t, storeURL).newest() >= last })

	l := listTimelines(t, storeURL)
	if len(l.Timelines) != 2 || l.Timelines[1].Parent != "first" || l.Timelines[1].ForkRevision != mid || !l.Timelines[1].Newest {
		t.Fatalf("timelines: %+v", l.Timelines)
	}
	for _, c := range l.Chains {
		if c.Timeline == "first" && c.LastRevision > end {
			t.Fatalf("the old timeline grew past its end %d: %+v", end, c)
		}
	}
	table := ok(t, nil, "list", "--store", storeURL)
	if !strings.Contains(table, fmt.Sprintf("forked from first at revision %d", mid)) {
		t.Fatalf("list does not say where the timeline forked:\n%s", table)
	}
	t.Logf("a user sees:\n%s", table)
	// The newest timeline is the live cluster, to its last revision.
	var v struct {
		Revision int64  `json:"revision"`
		Live     string `json:"live"`
	}
	out := ok(t, nil, append([]string{"verify", "--store", storeURL, "-o", "json", "--against", r.Endpoints()[0]}, connFlags(r.Security, "backup")...)...)
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Live != "equal" || v.Revision != last {
		t.Fatalf("verify --against the restored cluster: %s", out)
	}
	checkEtcdBRRestores(t, storeURL, rcli)
	if err := p2.term(t); err != nil {
		t.Fatal(err)
	}
	// A restore of the old timeline, from a full older than the newest
	// (bumped, its database holds the bump's empty key): its cluster
	// begins a third timeline and backs up, and etcd-backup-restore's
	// rule restores it too.
	r3 := restoredMember(t, storeURL, sec, "--timeline", "first")
	p3 := startServe(t, append([]string{"--endpoints", r3.Endpoints()[0]}, connFlags(r3.Security, "backup")...), storeURL)
	uploading(t, p3)
	r3cli := r3.Client(t)
	last3 := one(r3cli, 20, "third")
	etcdtest.Eventually(t, "the third timeline reaches its cluster's end", 30*time.Second, func() bool { return listTimelines(t, storeURL).newest() >= last3 })
	if n := len(listTimelines(t, storeURL).Timelines); n != 3 {
		t.Fatalf("%d timelines after a second fork, want 3", n)
	}
	checkEtcdBRRestores(t, storeURL, r3cli)
	if err := p3.term(t); err != nil {
		t.Fatal(err)
	}
	r3.Close()
	// The old timeline's head restores to the old cluster's last state,
	// at its own revision when asked to keep it.
	o := restoredMember(t, storeURL, sec, "--timeline", "first", "--revision-bump", "0")
	got, err := history.LiveDigest(ctx, o.Client(t), end)
	if err != nil || got != oldHead {
		t.Fatalf("the old timeline's head sums to %v (%v), the old cluster's end to %v", got, err, oldHead)
	}
	if resp, err := o.Client(t).Get(ctx, "\x00", clientv3.WithCountOnly()); err != nil || resp.Header.Revision != end {
		t.Fatalf("the old timeline restored to revision %v (%v), want %d", resp.Header.Revision, err, end)
	}
	// Anyone with the store's credentials can add a record of a fork at
	// the middle of the old chain, and a locked bucket keeps it: the
	// default restore follows it, and says what it leaves out.
	began := time.Now().Add(time.Minute).Unix()
	forged := filepath.Join(strings.TrimPrefix(storeURL, "file://"), "etcdkit", "timelines", fmt.Sprintf("%d-cafebabe.json", began))
	if err := os.WriteFile(forged, fmt.Appendf(nil, `{"id":"cafebabe","began":%q,"parent":"first","fork_revision":%d,"reason":"restored to revision %d"}`,
		time.Unix(began, 0).UTC().Format(time.RFC3339), mid, mid), 0o600); err != nil {
		t.Fatal(err)
	}
	out = ok(t, nil, "restore", "--store", storeURL, "--data-dir", filepath.Join(t.TempDir(), "forged"))
	if !saysRevision(out, mid) {
		t.Fatalf("a restore that follows a record of a fork does not say it restored revision %d:\n%s", mid, out)
	}
	for _, want := range []string{
		fmt.Sprintf("timeline first holds backups up to revision %d, past the %d restored here from the newest timeline, cafebabe", end, mid),
		fmt.Sprintf("holds backups up to revision %d", last), "--timeline first restores from it"} {
		if !strings.Contains(out, want) {
			t.Fatalf("a restore that follows a record of a fork lacks %q:\n%s", want, out)
		}
	}
}

// Another cluster's full under a member's prefix, as etcd-backup-restore
// (no identity record: its database names other members) or copy (its
// identity record copied with it) leave one, is refused by serve, named in
// /readyz and a metric, and nothing is written; the store stays as it was.
func TestForeignFullWithoutIdentityIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, aConn := secureMember(t)
	writes(t, a.Client(t), 50, "a")
	// copy's Local stores live under the home directory, as
	// etcd-backup-restore's.
	home := t.TempDir()
	ok(t, nil, append([]string{"snapshot", "--store", "file://" + filepath.Join(home, "own", "x")}, aConn...)...)
	ok(t, []string{"HOME=" + home}, "copy", "--storage-provider=Local", "--store-container=copied", "--store-prefix=p",
		"--source-storage-provider=Local", "--source-store-container=own", "--source-store-prefix=x")
	copied, ebr := filepath.Join(home, "copied"), t.TempDir()
	// etcd-backup-restore's own full: etcd's stream, gzip, its name.
	rc, err := a.Client(t).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := io.ReadAll(rc)
	_ = rc.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(db)
	_ = zw.Close()
	st, err := store.Open(ctx, "file://"+ebr)
	if err != nil {
		t.Fatal(err)
	}
	head, err := a.Client(t).Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, fmt.Sprintf("p/v2/Full-00000000-%08d-%d.gz", head.Header.Revision, time.Now().Unix()), &gz); err != nil {
		t.Fatal(err)
	}

	b, bConn := secureMember(t)
	writes(t, b.Client(t), 500, "b")
	// The copy carries its full's identity record, so it is refused by
	// it; etcd-backup-restore's full has none, and is refused by the
	// members its own database names.
	for name, c := range map[string]struct{ dir, why string }{
		"copy": {copied, "was taken of cluster"}, "etcd-backup-restore": {ebr, "no identity record"},
	} {
		dir := c.dir
		t.Run(name, func(t *testing.T) {
			storeURL := "file://" + filepath.Join(dir, "p")
			before := ok(t, nil, "list", "--store", storeURL, "-o", "json")
			p := startServe(t, bConn, storeURL, "--drill-period", "100ms")
			var body map[string]any
			etcdtest.Eventually(t, "serve refuses the foreign full", 30*time.Second, func() bool {
				resp, err := http.Get(p.url + "/readyz")
				if err != nil {
					return false
				}
				defer func() { _ = resp.Body.Close() }()
				body = map[string]any{}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				return resp.StatusCode == http.StatusServiceUnavailable && body["refused"] == "other-cluster"
			})
			msg := fmt.Sprint(body["error"])
			if !strings.Contains(msg, c.why) || !strings.Contains(msg, "--allow-new-chain") {
				t.Fatalf("/readyz: %v", body)
			}
			t.Logf("/readyz says: %s", msg)
			resp, err := http.Get(p.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			metrics, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if !strings.Contains(string(metrics), `etcdkit_backups_refused{reason="other-cluster"} 1`) {
				t.Fatalf("metrics:\n%s", grepLines(string(metrics), "refused"))
			}
			// Nor is the foreign chain drilled against this cluster.
			etcdtest.Eventually(t, "serve skips the drills", 30*time.Second, func() bool {
				return strings.Contains(p.logs.String(), "no restore drill while the backups are refused")
			})
			if err := p.term(t); err != nil {
				t.Fatal(err)
			}
			if drills, _ := filepath.Glob(filepath.Join(dir, "p", "etcdkit", "drills", "*")); len(drills) > 0 {
				t.Fatalf("the foreign chain was drilled against this cluster: %v", drills)
			}
			if after := ok(t, nil, "list", "--store", storeURL, "-o", "json"); after != before {
				t.Fatalf("the foreign store changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}
