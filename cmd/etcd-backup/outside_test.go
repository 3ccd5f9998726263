package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/store"
)

// One serve --from-outside backs up a cluster it does not run beside:
// three real etcd processes of each release etcdkit runs, TLS with client
// certificates on, as a Deployment beside a kubeadm or external etcd runs
// it. A writer runs throughout. The leader is moved, then killed (SIGKILL)
// while a delta is pending and started again (on 3.6, kubeadm's release,
// each other member after it); the chain goes on through each, and at the
// end the store's backups hold
// every acknowledged write at the revision etcd acknowledged it, in one
// chain with no gap. On the kubeadm release (3.6) a second serve on the
// same prefix takes over, and the first exits 1 saying why.
func TestServeFromOutside(t *testing.T) {
	t.Parallel()
	for _, kind := range emulator.EtcdKinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			serveFromOutside(t, kind)
		})
	}
}

func serveFromOutside(t *testing.T, kind emulator.Kind) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sec := etcdtest.Reserve(t, etcdtest.Options{TLS: true}).Security
	members := emulator.RequireEtcdCluster(t, kind, 3, emulator.EtcdOptions{CA: sec.CA.File, Cert: sec.Member.CertFile, Key: sec.Member.KeyFile,
		ClientCert: sec.Client.CertFile, ClientKey: sec.Client.KeyFile})
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.Etcd.ClientURL)
	}
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: endpoints, TLS: sec.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	storeURL := "file://" + t.TempDir()
	conn := append([]string{"--endpoints", strings.Join(endpoints, ",")}, connFlags(sec, "")...)
	p := startServe(t, conn, storeURL, "--from-outside", "--delta-period", "300ms")
	w := startWriter(ctx, cli, "/outside/")
	defer w.stop()
	newest := func() int64 { return listTimelines(t, storeURL).newest() }
	etcdtest.Eventually(t, "the store holds a chain", time.Minute, func() bool { return etcdBackup(t, nil, "list", "--store", storeURL).code == 0 && newest() > 1 })
	// goesOn waits until the chain passes the cluster's revision now.
	goesOn := func(what string) {
		t.Helper()
		at := w.last()
		etcdtest.Eventually(t, "the chain goes on "+what, time.Minute, func() bool { return newest() > at })
	}

	from := leaderURL(t, ctx, cli)
	lcli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{from}, TLS: sec.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target := list.Members[0].ID
	if slices.Contains(list.Members[0].ClientURLs, from) {
		target = list.Members[1].ID
	}
	if _, err := lcli.MoveLeader(ctx, target); err != nil {
		t.Fatal(err)
	}
	_ = lcli.Close()
	goesOn("after the leader moved")

	// The leader is killed first; on the kubeadm release the other two
	// after it, so that whichever member the watch streams from dies once.
	killed := []*emulator.Server{}
	for _, m := range members {
		if m.Etcd.ClientURL == leaderURL(t, ctx, cli) {
			killed = append(killed, m)
		}
	}
	if kind == emulator.Etcd36 {
		for _, m := range members {
			if m != killed[0] {
				killed = append(killed, m)
			}
		}
	}
	for _, m := range killed {
		// A delta is pending whenever the writer has written since the
		// last one: the chain's end is behind the writer's. The chain is
		// read first: listing it takes longer than a delta period on a
		// busy machine, and a writer's revision read before the listing
		// is behind the chain by the time the listing answers.
		at := w.last()
		etcdtest.Eventually(t, "a delta pending", time.Minute, func() bool { end := newest(); return w.last() > end })
		m.Halt()
		goesOn(fmt.Sprintf("with %s killed (the chain ended at %d, the writer at %d)", m.Etcd.ClientURL, newest(), at))
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		err := m.Restart(rctx)
		rcancel()
		if err != nil {
			t.Fatal(err)
		}
	}

	if kind == emulator.Etcd36 {
		// A second serve on the prefix (a Deployment's new pod beside the
		// old one) writes from now on; the first leaves.
		second := startServe(t, conn, storeURL, "--from-outside", "--delta-period", "300ms")
		select {
		case err := <-p.exited:
			if err == nil || !strings.Contains(p.logs.String(), "another uploader writes "+storeURL) {
				t.Fatalf("the displaced serve exited with %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the displaced serve still runs a minute after the second started")
		}
		p = second
		goesOn("from the second serve")
	}

	acked := w.stop()
	last := int64(0)
	for _, rev := range acked {
		last = max(last, rev)
	}
	etcdtest.Eventually(t, "the chain reaches the last acknowledged write", time.Minute, func() bool { return newest() >= last })
	if err := p.term(t); err != nil {
		t.Fatal(err)
	}
	l := listTimelines(t, storeURL)
	if len(l.Timelines) != 1 {
		t.Fatalf("timelines: %+v", l.Timelines)
	}
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	// The state the chain restores: every acknowledged key, as of the
	// revision etcd acknowledged it; a gap in the chain fails to replay.
	state, err := history.ReadState(ctx, st, history.StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	modRev := map[string]int64{}
	for _, kv := range state.KVs {
		modRev[string(kv.Key)] = kv.ModRevision
	}
	for key, rev := range acked {
		if modRev[key] != rev {
			t.Fatalf("the backups (to revision %d) hold %s at revision %d; etcd acknowledged it at %d", state.Revision, key, modRev[key], rev)
		}
	}
	t.Logf("etcd %s: %d acknowledged writes across a leader move and %d members killed, all in the backups to revision %d",
		members[0].Etcd.Version, len(acked), len(killed), state.Revision)
}

// leaderURL is the client URL of the member that leads now.
func leaderURL(t *testing.T, ctx context.Context, cli *clientv3.Client) string {
	t.Helper()
	var leader member.Self
	etcdtest.Eventually(t, "a leader", time.Minute, func() bool {
		var err error
		leader, err = member.AskLeader(ctx, cli, 5*time.Second)
		return err == nil && leader.IsLeader()
	})
	return leader.Endpoint
}

// writer puts keys one after another's answer and remembers the
// revision of each acknowledged put.
type writer struct {
	mu    sync.Mutex
	acked map[string]int64
	top   int64
	quit  chan struct{}
	wg    sync.WaitGroup
}

// startWriter writes keys under prefix through cli until stopped.
func startWriter(ctx context.Context, cli *clientv3.Client, prefix string) *writer {
	w := &writer{acked: map[string]int64{}, quit: make(chan struct{})}
	w.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-w.quit:
				return
			case <-ctx.Done():
				return
			default:
			}
			key := fmt.Sprintf("%s%06d", prefix, i)
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := cli.Put(pctx, key, "v")
			cancel()
			if err == nil {
				w.mu.Lock()
				w.acked[key], w.top = resp.Header.Revision, max(w.top, resp.Header.Revision)
				w.mu.Unlock()
			}
		}
	})
	return w
}

// last is the revision of the newest acknowledged put.
func (w *writer) last() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.top
}

// count is how many puts were acknowledged.
func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// stop ends the writes and returns the acknowledged ones; again, it
// returns them again.
func (w *writer) stop() map[string]int64 {
	w.mu.Lock()
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	w.mu.Unlock()
	w.wg.Wait()
	return w.acked
}
