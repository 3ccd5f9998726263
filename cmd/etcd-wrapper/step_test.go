package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// backup runs an etcd-backup command to its end and returns its output
// and exit code.
func backup(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, backupBin, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("etcd-backup %v: %v\n%s", args, err, out)
	}
	return string(out), 0
}

// clusterVersion is the cluster version nd's member tells on its client
// URL's /version, "" while it does not answer.
func (s *secure) clusterVersion(t *testing.T, nd *node) string {
	t.Helper()
	c, err := tlsfiles.Files{CA: s.ca.File, Cert: s.operator.CertFile, Key: s.operator.KeyFile}.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: c.Transport(5 * time.Second), Timeout: 5 * time.Second}).Get(nd.client + "/version")
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return ""
	}
	return v.Cluster
}

// etcdFlags are etcd-backup's flags to reach the cluster as the backup
// user, over TLS.
func (s *secure) etcdFlags(eps string) []string {
	return []string{"--endpoints", eps, "--cacert", s.ca.File, "--cert", s.backup.CertFile, "--key", s.backup.KeyFile,
		"--user", "backup", "--password-file", s.passwordFile("backup")}
}

// A three-member cluster run by the wrapper steps between releases member
// by member, with TLS and authentication on and writes acknowledged
// throughout: 3.5 → 3.6, back to 3.5 through etcd's downgrade API, then
// 3.5 → 3.6 → 3.7. Each step is gated by check-upgrade and follows a full
// snapshot verified against the cluster; after each member every member
// is Ready as the same voter. In the end no acknowledged write is lost,
// and the full taken before the first step, restored for etcd 3.5, is
// started by etcd 3.5 with every key it held.
func TestStepwiseUpgradeAndBack(t *testing.T) {
	t.Parallel()
	sec := newSecure(t)
	nodes := newNodes(t, 3, sec)
	wrappers := map[string]*proc{}
	for _, nd := range nodes {
		logEvery50(t, nd, emulator.Etcd35)
		wrappers[nd.name] = wrapped(t, emulator.Etcd35, nodes, nd)
	}
	for _, nd := range nodes {
		nd.ready(t, 60*time.Second)
	}
	eps := endpoints(nodes)
	cli := sec.enableAuth(t, client(t, eps, sec))
	want := voters(t, cli)
	load := writeLoad(cli)
	defer load.end()
	store := "file://" + filepath.Join(t.TempDir(), "backups")

	// Each step: the gate, a verified full, then one member after another.
	var preUpgrade int64
	stepTo := func(kind emulator.Kind) {
		t.Helper()
		to := strings.TrimPrefix(string(kind), "etcd-")
		etcdtest.Eventually(t, "check-upgrade --to "+to+" says safe", 2*time.Minute, func() bool {
			out, code := backup(t, append([]string{"check-upgrade", "--to", to}, sec.etcdFlags(eps)...)...)
			if code != 0 {
				t.Logf("check-upgrade --to %s: exit %d\n%s", to, code, out)
			}
			return code == 0
		})
		out, code := backup(t, append([]string{"snapshot", "--store", store}, sec.etcdFlags(eps)...)...)
		if code != 0 {
			t.Fatalf("the full before the step to %s: exit %d\n%s", to, code, out)
		}
		out, code = backup(t, append([]string{"verify", "--store", store, "--against", eps}, sec.etcdFlags(eps)[2:]...)...)
		if code != 0 {
			t.Fatalf("verify before the step to %s: exit %d\n%s", to, code, out)
		}
		if preUpgrade == 0 {
			preUpgrade = lastBackedUp(t, store)
		}
		for _, nd := range nodes {
			if err := wrappers[nd.name].term(t); err != nil {
				t.Fatalf("%s stopped: %v", nd.name, err)
			}
			logEvery50(t, nd, kind)
			wrappers[nd.name] = wrapped(t, kind, nodes, nd)
			for _, o := range nodes {
				o.ready(t, 60*time.Second)
			}
			sameVoters(t, cli, want)
		}
		for _, nd := range nodes {
			sctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			st, err := cli.Status(sctx, nd.client)
			cancel()
			if err != nil || !strings.HasPrefix(st.Version, to+".") {
				t.Fatalf("after the step to %s, %s answers as etcd %v, %v", to, nd.name, st, err)
			}
		}
		// The step ends when the members agree on the release.
		etcdtest.Eventually(t, "the cluster version is "+to, 60*time.Second, func() bool {
			return sec.clusterVersion(t, nodes[0]) == to+".0"
		})
		t.Logf("stepped to etcd %s: %d writes acknowledged so far", to, load.count())
	}

	stepTo(emulator.Etcd36)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for _, op := range []clientv3.DowngradeAction{clientv3.DowngradeValidate, clientv3.DowngradeEnable} {
		if _, err := cli.Downgrade(ctx, op, "3.5"); err != nil {
			t.Fatalf("downgrade %v 3.5: %v", op, err)
		}
	}
	stepTo(emulator.Etcd35)
	stepTo(emulator.Etcd36)
	stepTo(emulator.Etcd37)
	load.end()
	load.check(t, cli)

	// The way back: the full taken before the first step, restored for
	// etcd 3.5 and started by it.
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "back")
	out, code := backup(t, "restore", "--store", store, "--revision", fmt.Sprint(preUpgrade), "--data-dir", data,
		"--name", "back", "--peer-urls", peer.String(), "--etcd-version", "3.5")
	if code != 0 || !regexp.MustCompile(`(?m)^for etcd\s+3\.5$`).MatchString(out) {
		t.Fatalf("restore of the pre-upgrade full for 3.5: exit %d\n%s", code, out)
	}
	back := emulator.RequireEtcd(t, emulator.Etcd35, emulator.EtcdOptions{DataDir: data, Name: "back", PeerURL: peer.String(),
		CA: sec.ca.File, Cert: sec.member.CertFile, Key: sec.member.KeyFile, ClientCert: sec.operator.CertFile, ClientKey: sec.operator.KeyFile})
	bcli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{back.Etcd.ClientURL},
		TLS: tlsfiles.Files{CA: sec.ca.File, Cert: sec.operator.CertFile, Key: sec.operator.KeyFile}, User: "root", PasswordFile: sec.passwordFile("root")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bcli.Close() }()
	load.checkAt(t, bcli, preUpgrade)
}

// logEvery50 sets nd's raft log short, in the keys of the release of
// kind, as an operator's configuration changes with the release: a raft
// snapshot every 50 entries, and 10 entries kept for a slow follower
// after it. A member's WAL then soon drops what etcd 3.5 wrote in its v2
// form, which etcd 3.7 cannot replay, and a member stepping down soon
// drops the entries of the newer release, which hold its storage at that
// release until they go (etcd keeps 5,000 by default: a cluster that
// lives longer than that between steps drops them too).
func logEvery50(t *testing.T, nd *node, kind emulator.Kind) {
	t.Helper()
	b, err := os.ReadFile(nd.config)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for line := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasPrefix(line, "snapshot-count:") && !strings.Contains(line, "catch") {
			keep = append(keep, line)
		}
	}
	catchUp := "snapshot-catchup-entries"
	if kind == emulator.Etcd35 {
		catchUp = "experimental-snapshot-catch-up-entries"
	}
	keep = append(keep, "snapshot-count: 50", catchUp+": 10")
	if err := os.WriteFile(nd.config, []byte(strings.Join(keep, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// count is how many writes were acknowledged so far.
func (a *acked) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.writes)
}

// check fails unless every acknowledged write is there, as written.
func (a *acked) check(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	a.checkAt(t, cli, 0)
}

// checkAt fails unless the writes acknowledged at or before rev (every
// one, with rev 0) are there as written and none after it is.
func (a *acked) checkAt(t *testing.T, cli *clientv3.Client, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/acked/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]string{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = string(kv.Value)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var lost, extra, checked int
	for key, at := range a.writes {
		v, ok := have[key]
		switch {
		case rev == 0 || at <= rev:
			checked++
			if !ok || v != key {
				lost++
			}
		case ok:
			extra++
		}
	}
	if lost > 0 || extra > 0 {
		t.Fatalf("%d of %d acknowledged writes (at or before revision %d) are lost, %d after it are there", lost, checked, rev, extra)
	}
	t.Logf("%d acknowledged writes checked (%d failed to be acknowledged while members stepped)", checked, len(a.failures))
}
