package member_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
)

// etcd allows one pending learner: a second add waits for the first to go,
// and gives up at its deadline.
func TestAddLearnerWaitsForPendingLearner(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	first, _, err := member.AddLearner(ctx, cli, []string{"http://127.0.0.1:1"}, member.RetryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Given up once etcd refused it: by the caller here, which is what a
	// deadline does too, without a race between the deadline and etcd's
	// first answer on a loaded machine.
	refused, giveUp := context.WithCancel(ctx)
	defer giveUp()
	log := slog.New(&onRecord{match: "too many learner", then: giveUp})
	_, _, err = member.AddLearner(refused, cli, []string{"http://127.0.0.1:2"}, member.RetryOptions{Logger: log})
	if err == nil || !strings.Contains(err.Error(), "gave up after") || !strings.Contains(err.Error(), "too many learner") {
		t.Fatalf("second learner beside a pending one: %v, want the refusal retried until given up", err)
	}
	go func() {
		time.Sleep(time.Second)
		_ = member.Remove(ctx, cli, first.ID, member.RetryOptions{})
	}()
	second, members, err := member.AddLearner(ctx, cli, []string{"http://127.0.0.1:2"}, member.RetryOptions{Deadline: 30 * time.Second})
	if err != nil {
		t.Fatalf("second learner once the first is removed: %v", err)
	}
	if !second.IsLearner || len(members) != 4 {
		t.Fatalf("added %+v, members %d", second, len(members))
	}
}

// A member moves to a new peer URL: update it, restart the member there.
func TestUpdatePeerURLs(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	st := etcdtest.Voters(t, cli, 3)
	m := c.Members[2]
	var id uint64
	for _, s := range st {
		if s.Name == m.Name {
			id = s.ID
		}
	}
	m.Stop()
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	if err := member.UpdatePeerURLs(ctx, cli, id, []string{peer.String()}, member.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	m.PeerURL = peer
	m.Restart(t)
	for _, s := range etcdtest.Voters(t, cli, 3) {
		if s.Name == m.Name && (len(s.PeerURLs) != 1 || s.PeerURLs[0] != peer.String()) {
			t.Fatalf("member %s has peer URLs %v, want %s", s.Name, s.PeerURLs, peer.String())
		}
	}
	if _, err := cli.Put(ctx, "/after-move", "ok"); err != nil {
		t.Fatal(err)
	}
	c.WaitSameData(t, m)
}

// A learner's sidecar and its wrapper both promote it: each returns
// without error, whichever wins. Raft drops a configuration change
// proposed while another is pending, and etcd then times the caller out:
// that is asked again, not a failure.
func TestConcurrentPromotions(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	m := c.NewMember(t, "m3")
	added, members, err := member.AddLearner(ctx, cli, []string{m.PeerURL.String()}, member.RetryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var initial []string
	for _, o := range members {
		name := o.Name
		if o.ID == added.ID {
			name = m.Name
		}
		initial = append(initial, name+"="+o.PeerURLs[0])
	}
	if err := m.StartWith(ctx, strings.Join(initial, ","), "existing"); err != nil {
		t.Fatal(err)
	}
	eps := []string{c.Members[0].ClientURL.String(), c.Members[1].ClientURL.String(), c.Members[2].ClientURL.String()}
	errs := make(chan error, len(eps))
	for _, ep := range eps {
		go func() {
			cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{ep}})
			if err == nil {
				defer func() { _ = cli.Close() }()
				err = member.PromoteWhenReady(ctx, cli, added.ID, member.RetryOptions{Deadline: time.Minute})
			}
			errs <- err
		}()
	}
	for range eps {
		if err := <-errs; err != nil {
			t.Fatalf("a concurrent promotion: %v", err)
		}
	}
	etcdtest.Voters(t, cli, 4)
}

// A removal may be answered by the member it removes, which stops before
// it says so: Remove asks again and another member confirms it.
func TestRemoveThroughTheRemovedMember(t *testing.T) {
	t.Parallel()
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			removeThroughTheRemovedMember(t)
		})
	}
}

func removeThroughTheRemovedMember(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	victim := c.Members[2]
	id := uint64(victim.Etcd().Server.MemberID())
	cli, err := etcdclient.New(context.Background(), etcdclient.Config{Endpoints: []string{victim.ClientURL.String(), c.Members[0].ClientURL.String()}})
	if err != nil {
		t.Fatal(err)
	}
	err = member.Remove(context.Background(), cli, id, member.RetryOptions{Deadline: 30 * time.Second})
	_ = cli.Close()
	if err != nil {
		t.Fatalf("remove through the removed member: %v", err)
	}
	etcdtest.Voters(t, c.Members[0].Client(t), 2)
}

// onRecord calls then once a record's attributes mention match.
type onRecord struct {
	match string
	then  func()
	once  sync.Once
}

func (h *onRecord) Enabled(context.Context, slog.Level) bool { return true }
func (h *onRecord) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *onRecord) WithGroup(string) slog.Handler            { return h }
func (h *onRecord) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if strings.Contains(a.Value.String(), h.match) {
			h.once.Do(h.then)
			return false
		}
		return true
	})
	return nil
}
