package capture

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
)

// A member that does not answer (hung, stopped with SIGSTOP: its socket
// takes connections and nothing answers) says nothing of the raft log,
// and is marked silent, so that the checks before the other objects do
// not wait for it as long; once it answers again it is waited for as long as the others.
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
	// A member under load may take longer than a silent one's wait: it is
	// asked again at each check until it answers.
	checks := func(what string, done func() bool) {
		t.Helper()
		etcdtest.Eventually(t, what, 30*time.Second, func() bool {
			if err := g.check(ctx); err != nil {
				t.Fatalf("a hung member stopped the check: %v", err)
			}
			return done()
		})
		if !g.silent[dead] {
			t.Fatalf("the hung member is not silent: %v", g.silent)
		}
	}
	checks("the live member answers", func() bool { return !g.silent[live] && g.index[live] > 0 })
	before := g.index[live]
	if _, err := c.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	checks("the live member's raft index grows", func() bool { return g.index[live] > before })

	// A member silent once answers again.
	g.silent[live] = true
	checks("the member answers again", func() bool { return !g.silent[live] })
}

// Endpoints that reach members of two clusters stop every upload, naming
// both: the events and fulls received may be either's.
func TestGuardRefusesTwoClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	b := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{a.Endpoints()[0], b.Endpoints()[0]}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	g := newGuard(ctx, cli)
	err = g.check(ctx)
	if !errors.Is(err, ErrTwoClusters) || !strings.Contains(err.Error(), a.Endpoints()[0]) || !strings.Contains(err.Error(), b.Endpoints()[0]) {
		t.Fatalf("two clusters' endpoints: %v", err)
	}
}
