package startup

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/etcdkit/etcdkit/member"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/validate"
)

// The decision table, on cluster states that are hard to stage with real
// members: a removed member with sound data, an added one not started, a
// lone member's damage, and a cluster without quorum.
func TestDecideTable(t *testing.T) {
	self := Config{Member: member.Spec{Name: "a", PeerURLs: []string{"http://a:2380"}, InitialCluster: "a=http://a:2380,b=http://b:2380,c=http://c:2380"}}
	alone := Config{Member: member.Spec{Name: "a", PeerURLs: []string{"http://a:2380"}, InitialCluster: "a=http://a:2380"}}
	others := []*pb.Member{
		{ID: 2, Name: "b", PeerURLs: []string{"http://b:2380"}},
		{ID: 3, Name: "c", PeerURLs: []string{"http://c:2380"}},
	}
	listed := append([]*pb.Member{{ID: 1, Name: "a", PeerURLs: []string{"http://a:2380"}, ClientURLs: []string{"http://a:2379"}}}, others...)
	// A member of the initial cluster that never started: named, no
	// client URLs published.
	neverStarted := append([]*pb.Member{{ID: 1, Name: "a", PeerURLs: []string{"http://a:2380"}}}, others...)
	unstarted := append([]*pb.Member{{ID: 1, PeerURLs: []string{"http://a:2380"}}}, others...)
	running := func(m []*pb.Member) cluster { return cluster{answered: []string{"http://b:2379"}, members: m} }
	// Nobody answers as a client: a member that accepted the connection
	// and said nothing (stopped, without quorum, slow), one whose peer
	// port names a cluster version, one that waits for a new cluster.
	silent := cluster{silent: []string{"http://b:2379: context deadline exceeded"}}
	silentPeer := cluster{silent: []string{"peer http://b:2380: context deadline exceeded"}, bootstrapping: []string{"http://c:2380"}}
	withData := cluster{withData: []string{"http://b:2380"}}
	bootstrapping := cluster{silent: []string{"http://b:2379: context deadline exceeded"}, bootstrapping: []string{"http://b:2380"}}
	// A peer port that answers TLS but not this member's questions: a new
	// cluster's member while the store holds no backups, else unknown.
	unreadable := cluster{silent: []string{"https://b:2379: context deadline exceeded"}, unreadable: []string{"https://b:2380"}}
	noQuorum := cluster{answered: []string{"http://b:2379"}, listErr: errors.New("context deadline exceeded")}
	existing := self
	existing.ClusterState = "existing"
	second := self
	second.Member.Name, second.Member.PeerURLs = "b", []string{"http://b:2380"}

	for _, tc := range []struct {
		name    string
		cfg     Config
		verdict validate.Verdict
		backups bool
		c       cluster
		want    Action
		id      uint64
		// member is the ID the data dir's WAL names; 0: not read.
		member uint64
	}{
		{"sound and listed", self, validate.Valid, false, running(listed), Restart, 1, 1},
		{"sound, listed under another ID", self, validate.Valid, false, running(listed), Rejoin, 1, 99},
		{"sound, no cluster answers", self, validate.Valid, false, cluster{}, Restart, 0, 0},
		{"sound but removed", self, validate.Valid, false, running(others), Rejoin, 0, 0},
		{"sound, removed on purpose", self, validate.Valid, false, running(others), Refuse, 0, 7},
		{"empty, added not started", self, validate.Empty, false, running(unstarted), JoinAsLearner, 1, 0},
		{"empty, in the initial cluster, never started", self, validate.Empty, false, running(neverStarted), Bootstrap, 1, 0},
		{"empty, never started, to join", existing, validate.Empty, false, running(neverStarted), Rejoin, 1, 0},
		{"empty and listed", self, validate.Empty, false, running(listed), Rejoin, 1, 0},
		{"empty, not listed", self, validate.Empty, false, running(others), JoinAsLearner, 0, 0},
		{"empty, no quorum", self, validate.Empty, false, noQuorum, Refuse, 0, 0},
		{"empty, nobody answers", self, validate.Empty, false, cluster{}, Bootstrap, 0, 0},
		{"empty, a peer silent", self, validate.Empty, false, silent, Refuse, 0, 0},
		{"empty, a peer silent, backups", self, validate.Empty, true, silent, Refuse, 0, 0},
		{"empty, a peer port silent", self, validate.Empty, false, silentPeer, Refuse, 0, 0},
		{"empty, a peer holds data", self, validate.Empty, false, withData, Refuse, 0, 0},
		{"empty, the others bootstrap too", self, validate.Empty, false, bootstrapping, Bootstrap, 0, 0},
		{"empty, an unreadable peer, no backups", self, validate.Empty, false, unreadable, Bootstrap, 0, 0},
		{"empty, an unreadable peer, backups", self, validate.Empty, true, unreadable, Refuse, 0, 0},
		{"corrupt, a peer silent", self, validate.Corrupt, false, silent, Refuse, 0, 0},
		{"empty, nobody answers, backups, first member", self, validate.Empty, true, cluster{}, Restore, 0, 0},
		{"empty, nobody answers, backups, another member", second, validate.Empty, true, cluster{}, Refuse, 0, 0},
		{"empty, to join but nobody answers", existing, validate.Empty, false, cluster{}, Refuse, 0, 0},
		{"corrupt, cluster runs", self, validate.Corrupt, false, running(listed), Rejoin, 1, 0},
		{"corrupt, no quorum", self, validate.Corrupt, false, noQuorum, Refuse, 0, 0},
		{"corrupt, peers silent", self, validate.Corrupt, false, cluster{}, Refuse, 0, 0},
		{"corrupt and alone", alone, validate.Corrupt, false, cluster{}, Restore, 0, 0},
		{"behind and alone", alone, validate.Behind, false, cluster{}, Restore, 0, 0},
		{"locked", self, validate.Locked, false, running(listed), Refuse, 0, 0},
		{"another member's volume", self, validate.WrongVolume, false, running(listed), Refuse, 0, 0},
		{"another release's data, listed", self, validate.OtherVersion, false, running(listed), Refuse, 0, 1},
		{"another release's data, removed", self, validate.OtherVersion, false, running(others), Refuse, 0, 1},
		{"removed on purpose", self, validate.Removed, false, running(others), Refuse, 0, 1},
		{"removed on purpose, nobody answers", self, validate.Removed, true, cluster{}, Refuse, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A store, empty or not: what a member without one may do is
			// TestDecideWithoutStore's.
			p := decide(tc.cfg, Check{Verdict: tc.verdict, Store: true, Backups: tc.backups, MemberID: tc.member}, tc.c, false)
			if p.Action != tc.want || p.ID != tc.id {
				t.Fatalf("%s (id %d, %s), want %s (id %d)", p.Action, p.ID, p.Reason, tc.want, tc.id)
			}
			if (tc.name == "empty, nobody answers, backups, another member" || strings.HasSuffix(tc.name, "no quorum") ||
				len(tc.c.silent)+len(tc.c.withData)+len(tc.c.unreadable) > 0 && p.Action == Refuse) && !p.Retry {
				t.Fatalf("a member waiting for the first one to restore, for quorum or for a silent peer, must retry: %+v", p)
			}
			if p.Action == Restore && tc.backups && p.InitialCluster != "a=http://a:2380" {
				t.Fatalf("the restoring member starts alone: %q", p.InitialCluster)
			}
			if (p.Action == Rejoin || p.Action == JoinAsLearner) && (p.ClusterState != "existing" || !p.Learner) {
				t.Fatalf("a join must start as a learner of the existing cluster: %+v", p)
			}
			if p.Action == JoinAsLearner && tc.c.members != nil && p.InitialCluster != "a=http://a:2380,b=http://b:2380,c=http://c:2380" {
				t.Fatalf("initial cluster %q", p.InitialCluster)
			}
			// Only a member the cluster removed stays up out of the cluster;
			// a release stops it for the operator to run another.
			if p.Hold != (tc.verdict == validate.Removed || tc.name == "sound, removed on purpose") || p.Action == Refuse && p.Retry && (tc.verdict == validate.Removed || tc.verdict == validate.OtherVersion) {
				t.Fatalf("hold %v, retry %v for %s", p.Hold, p.Retry, tc.verdict)
			}
		})
	}
}

// Sound data of another cluster (a volume from elsewhere, its guard file
// deleted) is never taken for this cluster's removed member: no member
// is removed for it, listed or not, and nothing is moved aside.
func TestAnotherClustersDataIsRefused(t *testing.T) {
	self := Config{Member: member.Spec{Name: "a", PeerURLs: []string{"http://a:2380"}, InitialCluster: "a=http://a:2380,b=http://b:2380"}}
	listed := []*pb.Member{{ID: 1, Name: "a", PeerURLs: []string{"http://a:2380"}}, {ID: 2, Name: "b", PeerURLs: []string{"http://b:2380"}}}
	for _, members := range [][]*pb.Member{listed, listed[1:]} {
		c := cluster{answered: []string{"http://b:2379"}, members: members, id: 0xc1}
		p := decide(self, Check{Verdict: validate.Valid, MemberID: 99, ClusterID: 0xf0}, c, true)
		if p.Action != Refuse || p.Retry || !strings.Contains(p.Reason, "holds cluster f0's data") {
			t.Fatalf("another cluster's data, %d members listed: %+v", len(members), p)
		}
		// The same data of this cluster: a removed member stays out, one
		// listed under another ID rejoins.
		p = decide(self, Check{Verdict: validate.Valid, MemberID: 99, ClusterID: 0xc1}, c, true)
		if len(members) == 1 && (p.Action != Refuse || !p.Hold) || len(members) == 2 && p.Action != Rejoin {
			t.Fatalf("this cluster's data of a removed member, %d members listed: %+v", len(members), p)
		}
	}
}

// Whether a release may join a cluster, as etcd judges before it lets a
// member join and by its rule of one minor between releases, from what
// the members tell of their releases.
func TestJoinable(t *testing.T) {
	v := etcdversion.MustParse
	at := func(server, cluster string) release {
		return release{member: "member b", server: v(server), cluster: v(cluster)}
	}
	down := at("3.6.16", "3.5.0")
	down.downgrade = true
	silent := release{member: "member c", why: "connection refused"}
	for _, tc := range []struct {
		name    string
		etcd    string
		rs      []release
		ok      bool
		unknown bool
	}{
		{"the same release", "3.5.35", []release{at("3.5.35", "3.5.0"), at("3.5.27", "3.5.0")}, true, false},
		{"a step up", "3.6.16", []release{at("3.5.35", "3.5.0"), at("3.6.16", "3.5.0")}, true, false},
		{"two steps up", "3.7.3", []release{at("3.5.35", "3.5.0")}, false, false},
		{"two steps up, a member on the way", "3.7.3", []release{at("3.6.16", "3.5.0"), at("3.5.35", "3.5.0")}, false, false},
		{"a cluster past its release", "3.5.35", []release{at("3.6.16", "3.6.0")}, false, false},
		{"one member down", "3.6.16", []release{silent, at("3.6.16", "3.6.0")}, true, false},
		{"a new cluster at etcd's floor", "3.5.35", []release{at("3.5.35", "3.0.0")}, true, false},
		{"a new cluster at etcd's floor, two steps up", "3.7.3", []release{at("3.5.35", "3.0.0")}, false, false},
		{"nobody tells", "3.6.16", []release{silent}, false, true},
		{"a downgrade enabled", "3.5.35", []release{down}, false, false},
		{"a downgrade enabled, the release past the target", "3.6.16", []release{down}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, unknown := joinable(v(tc.etcd), tc.rs)
			if (why == "") != (tc.ok || tc.unknown) || unknown != tc.unknown {
				t.Fatalf("joinable %q, unknown %v; want ok %v, unknown %v", why, unknown, tc.ok, tc.unknown)
			}
			join := Plan{Action: JoinAsLearner, Reason: "the data dir is empty and a cluster runs without this member: scale up", ClusterState: "existing", Learner: true}
			p := joinPlan(join, v(tc.etcd), tc.rs)
			switch {
			case tc.ok && p.Action != JoinAsLearner:
				t.Fatalf("plan %+v", p)
			case !tc.ok && (p.Action != Refuse || p.Retry != tc.unknown || p.Hold || !strings.Contains(p.Reason, "etcd "+tc.etcd)):
				t.Fatalf("plan %+v", p)
			}
			t.Log(p.Reason)
		})
	}
}

// Without a store a corrupt member restores nothing: it refuses, saying
// what would let it start, unless it may wipe its data dir and its peers
// hold the data.
func TestDecideWithoutStore(t *testing.T) {
	self := Config{Member: member.Spec{Name: "a", PeerURLs: []string{"http://a:2380"}, InitialCluster: "a=http://a:2380,b=http://b:2380"}}
	alone := Config{Member: member.Spec{Name: "a", PeerURLs: []string{"http://a:2380"}, InitialCluster: "a=http://a:2380"}}
	listed := cluster{answered: []string{"http://b:2379"}, members: []*pb.Member{
		{ID: 1, Name: "a", PeerURLs: []string{"http://a:2380"}, ClientURLs: []string{"http://a:2379"}},
		{ID: 2, Name: "b", PeerURLs: []string{"http://b:2380"}, ClientURLs: []string{"http://b:2379"}},
	}}
	for _, tc := range []struct {
		name     string
		cfg      Config
		wipe     bool
		want     Action
		remedies []Remedy
	}{
		{"corrupt, cluster runs", self, false, Refuse, []Remedy{GiveStore, AllowWipe}},
		{"corrupt, cluster runs, wipe", self, true, Rejoin, nil},
		{"corrupt and alone", alone, false, Refuse, []Remedy{GiveStore}},
		{"corrupt and alone, wipe", alone, true, Refuse, []Remedy{GiveStore}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := listed
			if tc.cfg.Member.InitialCluster == alone.Member.InitialCluster {
				c = cluster{}
			}
			p := decide(tc.cfg, Check{Verdict: validate.Corrupt, Reason: "bbolt: page 7 is damaged"}, c, tc.wipe)
			if p.Action != tc.want || !slices.Equal(p.Remedies, tc.remedies) {
				t.Fatalf("%s %v (%s), want %s %v", p.Action, p.Remedies, p.Reason, tc.want, tc.remedies)
			}
			if strings.Contains(p.Reason, "--") {
				t.Fatalf("the reason names a flag: %s", p.Reason)
			}
		})
	}
}
