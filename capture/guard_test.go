package capture

import (
	"context"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
)

// A member that does not answer (hung, stopped with SIGSTOP: its socket
// takes connections and nothing answers) says nothing of the raft log,
// and is marked silent, so that the checks before the other objects do
// not wait for it as long; once it answers again it is waited for again.
func TestGuardMarksAHungMemberSilent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hung := make(chan net.Conn, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			hung <- conn
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		close(hung)
		for conn := range hung {
			_ = conn.Close()
		}
	})
	live := c.Endpoints()[0]
	dead := "http://" + ln.Addr().String()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{live, dead}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })

	g := newGuard(ctx, cli)
	if !g.silent[dead] || g.silent[live] || g.index[live] == 0 {
		t.Fatalf("after the first check: silent %v, raft indexes %v", g.silent, g.index)
	}
	before := g.index[live]
	if _, err := c.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := g.check(ctx); err != nil {
		t.Fatalf("a hung member stopped the check: %v", err)
	}
	if !g.silent[dead] || g.index[live] <= before {
		t.Fatalf("after a write: silent %v, raft indexes %v (was %d)", g.silent, g.index, before)
	}

	// The member answers again.
	cli.SetEndpoints(live)
	g.silent[live] = true
	if err := g.check(ctx); err != nil || g.silent[live] {
		t.Fatalf("a member that answers again: %v, silent %v", err, g.silent)
	}
}
