package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
)

// voters are the cluster's voting members by name, with their IDs; the
// test fails on a learner or an unstarted member.
func voters(t *testing.T, cli *clientv3.Client) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list at %v: %v", cli.Endpoints(), err)
	}
	out := map[string]uint64{}
	for _, m := range resp.Members {
		if m.IsLearner || m.Name == "" {
			t.Fatalf("member %x (%q) is a learner or has not started: %v", m.ID, m.Name, resp.Members)
		}
		out[m.Name] = m.ID
	}
	return out
}

// sameVoters fails unless the cluster's voters are want, by name and ID.
func sameVoters(t *testing.T, cli *clientv3.Client, want map[string]uint64) {
	t.Helper()
	if got := voters(t, cli); len(got) != len(want) || !mapsEqual(got, want) {
		t.Fatalf("the voters are %v, want %v", got, want)
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// keysUnder counts the keys under prefix, read linearizably.
func keysUnder(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// runEtcd runs a plain etcd server of kind on the node's configuration,
// as a cluster runs before etcdkit's wrapper is rolled in.
func runEtcd(t *testing.T, kind emulator.Kind, nd *node) *proc {
	t.Helper()
	return start(t, nd.name+" ("+string(kind)+")", emulator.RequireEtcdProgram(t, kind), nil, "--config-file", nd.config)
}

// wrapped runs etcd-wrapper for the node with the etcd server of kind as
// its child ("" for the etcd built in), and more flags.
func wrapped(t *testing.T, kind emulator.Kind, nodes []*node, nd *node, more ...string) *proc {
	t.Helper()
	args := []string{"--config", nd.config, "--peer-endpoints", others(nodes, nd), "--listen", nd.health}
	name := nd.name + " (etcd-wrapper)"
	if kind != "" {
		args = append(args, "--etcd", emulator.RequireEtcdProgram(t, kind))
		name = nd.name + " (etcd-wrapper, " + string(kind) + ")"
	}
	return start(t, name, wrapperBin, nil, append(args, more...)...)
}

// Rolled into a running etcd 3.5 cluster as an image swap does, one
// member after another, the wrapper that runs etcd 3.5 restarts each
// member on its own data: three voters with the same IDs and every key
// after each member, with TLS on clients and peers and authentication on.
// Before it, the wrapper of another release is refused on a member's data
// dir and changes nothing (the etcd 3.7 it embeds cannot run etcd 3.5's
// data, and the leave to wipe a corrupt data dir is no leave to wipe
// another release's), and a new member of etcd 3.7 is not added to the
// 3.5 cluster it cannot join.
func TestRollingSwapIntoA35Cluster(t *testing.T) {
	t.Parallel()
	sec := newSecure(t)
	nodes := newNodes(t, 3, sec)
	extra := newcomer(t, nodes, sec)
	plain := map[string]*proc{}
	for _, nd := range nodes {
		plain[nd.name] = runEtcd(t, emulator.Etcd35, nd)
	}
	cli := clientWhenUp(t, endpoints(nodes), sec)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	writeKeys(t, cli, "/swap/", 50)
	cli = sec.enableAuth(t, cli)
	want := voters(t, cli)

	// Another release's wrapper on a stopped member's data dir: refused,
	// with or without the leave to wipe a corrupt one.
	victim := nodes[2]
	if err := plain[victim.name].term(t); err == nil {
		t.Log("etcd 3.5 exited 0 on SIGTERM")
	}
	for _, more := range [][]string{nil, {"--on-corrupt=wipe"}} {
		w := wrapped(t, "", nodes, victim, more...)
		if code := w.wait(t, 60*time.Second); code != 1 || !logged(w.output(), "OtherVersion", "run etcd 3.5 or 3.6 on it") {
			t.Fatalf("etcd-wrapper (etcd 3.7) %v on etcd 3.5's data: exit %d\n%s", more, code, tail(w.output(), 20))
		}
		t.Logf("etcd-wrapper %v: %s", more, lineWith(w.output(), "refusing"))
	}
	if aside, _ := filepath.Glob(victim.dir + ".bak-*"); len(aside) != 0 {
		t.Fatalf("a data dir was moved aside: %v", aside)
	}
	sameVoters(t, cli, want)

	// A new member of etcd 3.7 beside the 3.5 cluster: not added.
	w := wrapped(t, "", nodes, extra)
	if code := w.wait(t, 60*time.Second); code != 1 || !logged(w.output(), "cannot join this cluster", "the cluster runs at 3.5") {
		t.Fatalf("a new etcd 3.7 member beside 3.5: exit %d\n%s", code, tail(w.output(), 20))
	}
	t.Logf("a new member of 3.7: %s", lineWith(w.output(), "refusing"))
	sameVoters(t, cli, want)

	// The swap, member by member, the stopped one first.
	for i, nd := range []*node{nodes[2], nodes[0], nodes[1]} {
		if i > 0 {
			if err := plain[nd.name].term(t); err == nil {
				t.Log("etcd 3.5 exited 0 on SIGTERM")
			}
		}
		wrapped(t, emulator.Etcd35, nodes, nd)
		nd.ready(t, 60*time.Second)
		sameVoters(t, cli, want)
		if n := keysUnder(t, cli, "/swap/"); n != 50 {
			t.Fatalf("after %s: %d keys, want 50", nd.name, n)
		}
	}
	st, err := cli.Status(ctx, nodes[0].client)
	if err != nil || !strings.HasPrefix(st.Version, "3.5.") {
		t.Fatalf("the swapped member answers as etcd %v, %v", st, err)
	}
}

// newcomer lays out a member to add to nodes' cluster: its initial
// cluster names nodes' members and itself.
func newcomer(t *testing.T, nodes []*node, sec *secure) *node {
	t.Helper()
	nd := newNodes(t, 1, sec)[0]
	initial := []string{}
	for _, o := range nodes {
		initial = append(initial, o.name+"="+o.peer)
	}
	nd.name = fmt.Sprintf("m%d", len(nodes))
	initial = append(initial, nd.name+"="+nd.peer)
	b, err := os.ReadFile(nd.config)
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(string(b), "name: m0\n", "name: "+nd.name+"\n", 1)
	conf = strings.Replace(conf, "initial-cluster: m0="+nd.peer+"\n", "initial-cluster: "+strings.Join(initial, ",")+"\n", 1)
	if err := os.WriteFile(nd.config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return nd
}

// clientWhenUp is a client of eps once a member answers.
func clientWhenUp(t *testing.T, eps string, sec *secure) *clientv3.Client {
	t.Helper()
	var cli *clientv3.Client
	etcdtest.Eventually(t, "a member answers at "+eps, 60*time.Second, func() bool {
		var err error
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		cli, err = etcdclient.New(ctx, sec.conn(eps))
		return err == nil
	})
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// writeKeys writes n keys under prefix once the cluster takes writes.
func writeKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	ctx := t.Context()
	etcdtest.Eventually(t, "the cluster takes a write", 60*time.Second, func() bool {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cli.Put(pctx, prefix+"first", "")
		return err == nil
	})
	for i := range n - 1 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.Put(pctx, fmt.Sprintf("%s%02d", prefix, i), "v")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// lineWith is the last line of out that holds part.
func lineWith(out, part string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], part) {
			return lines[i]
		}
	}
	return ""
}
