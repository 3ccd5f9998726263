package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
)

// threeWrappers starts a cluster of three wrappers, TLS on, and waits
// until every member is ready; startWrapper starts one again.
func threeWrappers(t *testing.T, sec *secure) (nodes []*node, wrappers map[string]*proc, startWrapper func(*node)) {
	t.Helper()
	nodes = newNodes(t, 3, sec)
	wrappers = map[string]*proc{}
	startWrapper = func(nd *node) {
		wrappers[nd.name] = start(t, "wrapper "+nd.name, wrapperBin, nil, "--config", nd.config, "--listen", nd.health,
			"--peer-endpoints", others(nodes, nd), "--log-format", "text")
	}
	for _, nd := range nodes {
		startWrapper(nd)
	}
	for _, nd := range nodes {
		nd.ready(t, 60*time.Second)
	}
	return nodes, wrappers, startWrapper
}

// A member whose data dir is lost while the two others are stopped
// (SIGSTOP: their sockets accept connections and nothing answers) waits:
// it never bootstraps a second cluster beside them, says why, and rejoins
// the cluster once its members run again. TLS on clients and peers, with
// client certificates.
func TestNoClusterBesideStoppedMembers(t *testing.T) {
	t.Parallel()
	sec := newSecure(t)
	nodes, wrappers, startWrapper := threeWrappers(t, sec)
	lost := nodes[2]
	wrappers[lost.name].kill(t)
	if err := os.RemoveAll(lost.dir); err != nil {
		t.Fatal(err)
	}
	stopped := []*proc{wrappers[nodes[0].name], wrappers[nodes[1].name]}
	for _, p := range stopped {
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	resumed := false
	resume := func() {
		if resumed {
			return
		}
		resumed = true
		for _, p := range stopped {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	startWrapper(lost)
	w := wrappers[lost.name]
	etcdtest.Eventually(t, lost.name+" waits for its silent peers", 60*time.Second, func() bool {
		return logged(w.output(), "startup: waiting", "answered nothing")
	})
	if out := w.output(); strings.Contains(out, "action=bootstrap") {
		t.Fatalf("%s bootstrapped beside its stopped peers:\n%s", lost.name, out)
	}
	t.Log(lastLine(w.output()))
	// Its probes say what it waits for.
	resp, err := http.Get("http://" + lost.health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "answered nothing") {
		t.Fatalf("/readyz while waiting: %d %s", resp.StatusCode, body)
	}
	resume()
	lost.ready(t, 90*time.Second)
	if out := w.output(); !logged(out, "startup: decided", "action=rejoin") || strings.Contains(out, "action=bootstrap") {
		t.Fatalf("%s did not rejoin once its peers ran again:\n%s", lost.name, out)
	}
}
