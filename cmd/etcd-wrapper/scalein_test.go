package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/startup"
)

// etcd-druid's scale-in from three members to one, as DEP-08 does it: one
// member removed through etcd's API per cycle, highest ordinal first, and
// the StatefulSet shrunk after. A removed member's etcd stops; its pod
// restarts in between, and its wrapper keeps it out: it does not start
// etcd, adds nothing to the cluster and holds, live but not ready, with
// the reason on /readyz and etcdkit_member_removed on /metrics, until the
// StatefulSet's shrink stops it. The lone member left keeps every key and
// restarts alone. TLS on clients and peers.
func TestScaleInKeepsRemovedMembersOut(t *testing.T) {
	t.Parallel()
	sec := newSecure(t)
	nodes, wrappers, startWrapper := threeWrappers(t, sec)
	cli := client(t, nodes[0].client, sec)
	writeKeys(t, cli, "/scale/", 30)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	for _, gone := range []*node{nodes[2], nodes[1]} {
		id := voters(t, cli)[gone.name]
		// etcd refuses a removal until its member has heard from every
		// peer lately (etcd-druid retries it the next cycle).
		etcdtest.Eventually(t, fmt.Sprintf("%s (%x) is removed", gone.name, id), 30*time.Second, func() bool {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := cli.MemberRemove(rctx, id)
			if err != nil {
				t.Logf("remove %s (%x): %v", gone.name, id, err)
			}
			return err == nil
		})
		// etcd stops on its own removal, and the wrapper with it.
		if code := wrappers[gone.name].wait(t, 60*time.Second); code != 1 {
			t.Fatalf("%s's wrapper exited %d after its member's removal, want 1\n%s", gone.name, code, tail(wrappers[gone.name].output(), 10))
		}
		// The pod restarts before the StatefulSet shrinks.
		startWrapper(gone)
		w := wrappers[gone.name]
		var refused string
		etcdtest.Eventually(t, gone.name+" holds out of the cluster", 60*time.Second, func() bool {
			code, body := probe(gone, "/readyz")
			var r struct{ Refused string }
			_ = json.Unmarshal([]byte(body), &r)
			refused = r.Refused
			return code == http.StatusServiceUnavailable && strings.Contains(refused, "on purpose")
		})
		t.Logf("%s, restarted after its removal: /readyz 503 %q", gone.name, refused)
		if code, body := probe(gone, "/livez"); code != http.StatusOK {
			t.Fatalf("%s holding: /livez %d %s", gone.name, code, body)
		}
		if _, metrics := probe(gone, "/metrics"); !strings.Contains(metrics, startup.MetricMemberRemoved+" 1") {
			t.Fatalf("%s holding: /metrics lacks %s 1:\n%s", gone.name, startup.MetricMemberRemoved, metrics)
		}
		if !logged(w.output(), "holding until stopped") || logged(w.output(), "added as learner") {
			t.Fatalf("%s's wrapper after its removal:\n%s", gone.name, tail(w.output(), 20))
		}
		list := voters(t, cli)
		if _, back := list[gone.name]; back {
			t.Fatalf("%s is a member again: %v", gone.name, list)
		}
		// The StatefulSet shrinks: the pod is stopped for good, and its
		// exit still says the member never started.
		if err := w.term(t); err == nil || !strings.Contains(lastLine(w.output()), "refusing to start") || !strings.Contains(lastLine(w.output()), "on purpose") {
			t.Fatalf("%s holding, on SIGTERM: %v\n%s", gone.name, err, tail(w.output(), 5))
		}
	}
	if list := voters(t, cli); len(list) != 1 || list[nodes[0].name] == 0 {
		t.Fatalf("after the scale-in the members are %v", list)
	}
	if err := wrappers[nodes[0].name].term(t); err != nil {
		t.Fatalf("the last member on SIGTERM: %v", err)
	}
	startWrapper(nodes[0])
	nodes[0].ready(t, 60*time.Second)
	if n := keysUnder(t, cli, "/scale/"); n != 30 {
		t.Fatalf("the last member holds %d keys, want 30", n)
	}
}

// probe asks nd's wrapper path on its --listen address: the status code
// and the body.
func probe(nd *node, path string) (int, string) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + nd.health + path)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A second wrapper of a running member, its data dir mistyped (empty),
// removes no member: the member it would rejoin answers as itself, so it
// refuses and changes nothing, and the running member stays a Ready voter.
func TestASecondCopyOfARunningMemberRemovesNothing(t *testing.T) {
	t.Parallel()
	sec := newSecure(t)
	nodes, _, _ := threeWrappers(t, sec)
	cli := client(t, endpoints(nodes), sec)
	want := voters(t, cli)
	b, err := os.ReadFile(nodes[0].config)
	if err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(t.TempDir(), "m0-typo.yaml")
	conf := strings.Replace(string(b), "data-dir: "+nodes[0].dir+"\n", "data-dir: "+nodes[0].dir+"-typo\n", 1)
	if err := os.WriteFile(typo, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	w := start(t, "wrapper m0 (a second copy)", wrapperBin, nil, "--config", typo, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--peer-endpoints", others(nodes, nodes[0]))
	if code := w.wait(t, 60*time.Second); code != 1 || !logged(w.output(), "runs and answers at", "nothing was changed") {
		t.Fatalf("a second copy of m0: exit %d\n%s", code, tail(w.output(), 20))
	}
	t.Logf("a second copy of m0: %s", lineWith(w.output(), "refusing"))
	sameVoters(t, cli, want)
	nodes[0].ready(t, 10*time.Second)
}
