package sidecar

import (
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A member is removed only when the cluster lists neither its ID nor its
// peer URLs: one that rejoins (its data dir moved aside, added again as a
// learner) is listed at the same peer URLs under a new ID, started or not.
func TestNoLongerListed(t *testing.T) {
	const id = 0xa1
	peers := []string{"https://10.0.0.3:2380"}
	others := []*etcdserverpb.Member{
		{ID: 0xb2, Name: "m0", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: 0xc3, Name: "m1", PeerURLs: []string{"https://10.0.0.2:2380"}},
	}
	for _, tc := range []struct {
		name    string
		members []*etcdserverpb.Member
		peers   []string
		want    bool
	}{
		{"listed", append(others, &etcdserverpb.Member{ID: id, Name: "m2", PeerURLs: peers}), peers, false},
		{"gone", others, peers, true},
		{"rejoining, not started yet", append(others, &etcdserverpb.Member{ID: 0xd4, PeerURLs: peers, IsLearner: true}), peers, false},
		{"rejoined", append(others, &etcdserverpb.Member{ID: 0xd4, Name: "m2", PeerURLs: peers}), peers, false},
		{"gone, its peer URLs never learned", others, nil, true},
		{"listed, its peer URLs never learned", append(others, &etcdserverpb.Member{ID: id, Name: "m2", PeerURLs: peers}), nil, false},
	} {
		if got := noLongerListed(tc.members, id, tc.peers); got != tc.want {
			t.Errorf("%s: noLongerListed = %v, want %v", tc.name, got, tc.want)
		}
	}
}
