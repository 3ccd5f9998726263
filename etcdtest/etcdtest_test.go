package etcdtest

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/wrapper"
)

func TestSingleMemberWorkloadSurvivesKill(t *testing.T) {
	ctx := context.Background()
	c := Start(t, Options{})
	m := c.Members[0]
	cli := m.Client(t)

	res, err := Workload{Ops: 300, Keys: 50, DeletePercent: 10, TxnPercent: 10, LeasePercent: 10, Seed: 1}.Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if res.LastRevision <= res.FirstRevision {
		t.Fatalf("revisions did not advance: first %d last %d", res.FirstRevision, res.LastRevision)
	}
	got, rev, err := ReadAll(ctx, cli, "/workload/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, res.Expected) {
		t.Fatalf("keyspace differs from the workload's expectation: %d keys, want %d", len(got), len(res.Expected))
	}
	if rev != res.LastRevision {
		t.Fatalf("read at revision %d, workload ended at %d", rev, res.LastRevision)
	}

	m.Kill()
	if m.Running() {
		t.Fatal("member still running after Kill")
	}
	m.Restart(t)
	got, rev, err = ReadAll(ctx, m.Client(t), "/workload/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, res.Expected) || rev != res.LastRevision {
		t.Fatalf("after kill and restart: %d keys at revision %d, want %d keys at %d", len(got), rev, len(res.Expected), res.LastRevision)
	}
}

func TestWorkloadIsRepeatable(t *testing.T) {
	ctx := context.Background()
	a := Start(t, Options{UnsafeNoFsync: true})
	b := Start(t, Options{UnsafeNoFsync: true})
	w := Workload{Ops: 200, DeletePercent: 20, TxnPercent: 20, Seed: 7}
	ra, err := w.Run(ctx, a.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := w.Run(ctx, b.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(ra.Expected, rb.Expected) || ra.LastRevision != rb.LastRevision {
		t.Fatalf("same seed gave different results: %d keys at %d vs %d keys at %d",
			len(ra.Expected), ra.LastRevision, len(rb.Expected), rb.LastRevision)
	}
}

func TestThreeMembersLeaderLossAndLearner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := Start(t, Options{Members: 3, UnsafeNoFsync: true})
	if len(c.Endpoints()) != 3 {
		t.Fatalf("endpoints: %v", c.Endpoints())
	}
	seen := map[string]bool{}
	for _, ep := range c.Endpoints() {
		if seen[ep] {
			t.Fatalf("two members share the client URL %s", ep)
		}
		seen[ep] = true
	}
	leader := c.Leader()
	if leader == nil {
		t.Fatal("no leader after start")
	}
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "before", "1"); err != nil {
		t.Fatal(err)
	}

	leader.Stop()
	if err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	next := c.Leader()
	if next == nil || next == leader {
		t.Fatalf("no new leader after stopping %s", leader.Name)
	}
	if _, err := cli.Put(ctx, "after", "2"); err != nil {
		t.Fatalf("write with two of three members: %v", err)
	}
	leader.Restart(t)

	learner := c.AddMember(t, AddMemberOptions{Learner: true})
	if !learner.Etcd().Server.IsLearner() {
		t.Fatalf("%s is not a learner", learner.Name)
	}
	members, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 4 {
		t.Fatalf("member list has %d members, want 4", len(members.Members))
	}
	// The learner replicates: it serves the earlier writes from its own copy.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _, err := ReadAll(ctx, learner.Client(t), "after", 0, clientv3.WithSerializable())
		if err == nil && got["after"] == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("learner never caught up: %v %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A cluster with TLS on clients and peers and authentication on starts,
// serves its users as their roles allow, and a member restarts.
func TestSecureCluster(t *testing.T) {
	ctx := context.Background()
	c := Start(t, Options{Members: 3, TLS: true, Auth: true, UnsafeNoFsync: true})
	for _, m := range c.Members {
		if m.ClientURL.Scheme != "https" || m.PeerURL.Scheme != "https" {
			t.Fatalf("member %s: %s, %s", m.Name, m.ClientURL.String(), m.PeerURL.String())
		}
	}
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "/secure", "v"); err != nil {
		t.Fatal(err)
	}
	st, err := cli.AuthStatus(ctx)
	if err != nil || !st.Enabled {
		t.Fatalf("auth status: %v, %v", st, err)
	}
	reader := c.ClientConfig()
	reader.User, reader.PasswordFile = "reader", c.Security.PasswordFile("reader")
	rc, err := etcdclient.New(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if _, err := rc.Get(ctx, "/secure"); err != nil {
		t.Fatalf("the reader reads: %v", err)
	}
	if _, err := rc.Put(ctx, "/secure", "w"); err == nil {
		t.Fatal("the reader wrote")
	}
	c.Members[1].Stop()
	c.Members[1].Restart(t)
	if _, err := c.Members[1].Client(t).Get(ctx, "/secure"); err != nil {
		t.Fatal(err)
	}
}

// A member's configuration file reads back, through the wrapper's strict
// loader, as the member's configuration, transport security included.
func TestConfigFile(t *testing.T) {
	c := Reserve(t, Options{Members: 3, TLS: true})
	m := c.Members[1]
	got, err := wrapper.LoadConfig(m.ConfigFile(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	want := m.Config()
	if got.Name != want.Name || got.Dir != want.Dir || got.InitialCluster != want.InitialCluster ||
		got.AdvertiseClientUrls[0] != want.AdvertiseClientUrls[0] || got.ListenPeerUrls[0] != want.ListenPeerUrls[0] ||
		got.ClientTLSInfo.CertFile != want.ClientTLSInfo.CertFile || !got.PeerTLSInfo.ClientCertAuth || got.TickMs != want.TickMs {
		t.Fatalf("read back %+v\nwant %+v", got, want)
	}
}

// A port lost to another listener is reported with the process holding
// it, so a failed restart says who took the port.
func TestPortHoldersNamesTheListener(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp (not Linux): holders are unknown here")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	got := portHolders(port)
	want := fmt.Sprintf("port %s: pid %d (", port, os.Getpid())
	if !strings.Contains(got, want) {
		t.Fatalf("holders of %s: %q, want it to contain %q", port, got, want)
	}
}

// A restart whose port another process holds waits for it, and names the
// holder when it never lets go; once the port is free it starts.
func TestRestartNamesWhoHoldsItsPort(t *testing.T) {
	c := Start(t, Options{UnsafeNoFsync: true})
	m := c.Members[0]
	m.Stop()
	l, err := net.Listen("tcp", m.PeerURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = m.restart(ctx)
	if want := fmt.Sprintf("pid %d (", os.Getpid()); err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), want) {
		t.Fatalf("restart on a held port: %v, want \"address already in use\" naming %q", err, want)
	}
	_ = l.Close()
	m.Restart(t)
	if _, err := c.Client(t).Put(context.Background(), "/after-restart", "x"); err != nil {
		t.Fatal(err)
	}
}
