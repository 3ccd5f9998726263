package main

import (
	"context"
	"testing"
	"time"
)

// A member whose etcd user (its client certificate's common name) lacks
// the root role restarts, and says at once that it could not rejoin its
// cluster after losing its data, not only on the day it must.
func TestMembershipRightsCheckedAtStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sec := newSecure(t)
	nodes, wrappers, startWrapper := threeWrappers(t, sec)
	cli := client(t, endpoints(nodes), sec)
	cli = sec.enableAuth(t, cli)
	if _, err := cli.UserRevokeRole(ctx, "etcd-wrapper", "root"); err != nil {
		t.Fatal(err)
	}
	nd := nodes[2]
	if err := wrappers[nd.name].term(t); err != nil {
		t.Fatal(err)
	}
	startWrapper(nd)
	nd.ready(t, 60*time.Second)
	if out := wrappers[nd.name].output(); !logged(out, "could not rejoin its cluster", "grant-role etcd-wrapper root") {
		t.Fatalf("the restarted member did not say its user lacks the root role:\n%s", out)
	}
}
