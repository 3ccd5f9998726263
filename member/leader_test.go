package member_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
)

// AskLeader finds the leader through any of the endpoints, names it while
// a follower is down (without waiting out the silent one's timeout), and
// fails once no quorum is left to name one.
func TestAskLeader(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	self, err := member.AskLeader(ctx, cli, 2*time.Second)
	leader := c.Leader()
	if err != nil || !self.IsLeader() || self.ID != uint64(leader.Etcd().Server.MemberID()) || self.Endpoint != leader.ClientURL.String() {
		t.Fatalf("the leader %s (%s): %+v %v", leader.Name, leader.ClientURL.String(), self, err)
	}
	var followers []*etcdtest.Member
	for _, m := range c.Members {
		if m != leader {
			followers = append(followers, m)
		}
	}
	followers[0].Kill()
	// The timeout is long: an answer that waited for the member that is
	// down would take it.
	start := time.Now()
	self, err = member.AskLeader(ctx, cli, time.Minute)
	if err != nil || !self.IsLeader() || self.Endpoint != leader.ClientURL.String() {
		t.Fatalf("with %s down: %+v %v", followers[0].Name, self, err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("with %s down the leader's answer waited %v for it", followers[0].Name, took)
	}
	followers[1].Kill()
	// The leader alone steps down once it misses its quorum (check-quorum).
	etcdtest.Eventually(t, "no member names a leader", time.Minute, func() bool {
		_, err = member.AskLeader(ctx, cli, 2*time.Second)
		return err != nil
	})
	if !strings.Contains(err.Error(), "names a leader") {
		t.Fatalf("without a quorum: %v", err)
	}
}
