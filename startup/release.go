package startup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// release is what one member of a running cluster says of its etcd
// release on its peer URL, where etcd asks before a member joins
// (/version and /downgrade/enabled).
type release struct {
	member string
	// server is the member's etcd; cluster the version its cluster runs
	// at, as this member knows it.
	server, cluster etcdversion.Version
	// downgrade: the member says a downgrade is enabled.
	downgrade bool
	// why says why it did not tell; "" when it did.
	why string
}

func (r release) String() string {
	if r.why != "" {
		return r.member + ": " + r.why
	}
	s := fmt.Sprintf("%s: etcd %s, cluster version %s", r.member, r.server, r.cluster)
	if r.downgrade {
		s += ", downgrade enabled"
	}
	return s
}

// joinable says why etcd of release e cannot join the cluster whose
// members told rs, "" when it can; unknown when no member told. It is
// etcd's own judgement before a member joins (isCompatibleWithCluster:
// every cluster version a member tells lies between 3.0 and e's minor,
// or, while a downgrade is enabled, is the minor past e's), with etcd's
// rule of one minor between releases on top: etcd admits a member two
// minors ahead, which then fails on the log it is sent (etcd 3.7 panics
// on etcd 3.5's v2 entries). Members that did not tell are left out, as
// etcd leaves them out: one member may be down while another joins.
func joinable(e etcdversion.Version, rs []release) (why string, unknown bool) {
	e = e.Trim()
	var problems []string
	add := func(format string, args ...any) {
		if p := fmt.Sprintf(format, args...); !slices.Contains(problems, p) {
			problems = append(problems, p)
		}
	}
	servers := map[string][]string{}
	told := 0
	for _, r := range rs {
		if r.why != "" {
			continue
		}
		told++
		switch c := r.cluster.Trim(); {
		case !etcdversion.Decided(c):
			// A new cluster whose members have not all told their
			// releases yet runs at etcd's floor: their servers tell.
		case r.downgrade && c != e.Next():
			add("the cluster is stepping down to %s (a downgrade is enabled), and etcd lets no member of %s join it until the downgrade is done", c.MinorString(), e.MinorString())
		case !r.downgrade && e.Less(c):
			add("the cluster runs at %s, newer than etcd %s", c.MinorString(), e.MinorString())
		case !r.downgrade && c.Steps(e) > 1:
			add("the cluster runs at %s, and etcd steps one minor at a time: etcd %s cannot apply what a %s cluster logs", c.MinorString(), e.MinorString(), c.MinorString())
		}
		if s := r.server.Trim(); s.Steps(e) > 1 || e.Steps(s) > 1 {
			servers[r.server.String()] = append(servers[r.server.String()], r.member)
		}
	}
	if told == 0 {
		return "", true
	}
	for _, v := range sortedKeys(servers) {
		add("%s run%s etcd %s, more than a minor from %s", strings.Join(servers[v], " and "), map[bool]string{true: "s"}[len(servers[v]) == 1], v, e.MinorString())
	}
	return strings.Join(problems, "; "), false
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// joinPlan is p, a join or a rejoin, when etcd of release e can join the
// cluster whose members told rs; otherwise a refusal that changes
// nothing, and waits while no member told.
func joinPlan(p Plan, e etcdversion.Version, rs []release) Plan {
	why, unknown := joinable(e, rs)
	var said []string
	for _, r := range rs {
		said = append(said, r.String())
	}
	switch {
	case unknown:
		return Plan{Action: Refuse, Retry: true, Reason: fmt.Sprintf("%s, but whether etcd %s may join the cluster cannot be told: no member told its release (%s); nothing is changed until one does",
			p.Reason, e, strings.Join(said, "; "))}
	case why != "":
		return Plan{Action: Refuse, Reason: fmt.Sprintf("%s, but etcd %s cannot join this cluster: %s; nothing was changed: run the release the cluster runs, or step the cluster toward this one first",
			p.Reason, e, why)}
	}
	return p
}

// askReleases asks every listed member but this one (self, or this
// member's name and peer URLs) its release on its peer URLs, at once, as
// etcd does before a member joins.
func askReleases(ctx context.Context, cfg Config, members []*pb.Member, self uint64, o Options) []release {
	files := peerFiles(o)
	var others []*pb.Member
	for _, m := range members {
		if (self != 0 && m.ID == self) || (m.Name != "" && m.Name == cfg.Member.Name) ||
			slices.ContainsFunc(m.PeerURLs, func(u string) bool { return slices.Contains(cfg.Member.PeerURLs, u) }) {
			continue
		}
		others = append(others, m)
	}
	out := make([]release, len(others))
	var wg sync.WaitGroup
	for i, m := range others {
		wg.Go(func() { out[i] = askRelease(ctx, m, files, o.Timeout) })
	}
	wg.Wait()
	return out
}

// askRelease asks one member's peer URLs until one tells.
func askRelease(ctx context.Context, m *pb.Member, files *tlsfiles.Client, timeout time.Duration) release {
	r := release{member: fmt.Sprintf("member %x", m.ID)}
	if m.Name != "" {
		r.member = fmt.Sprintf("member %s (%x)", m.Name, m.ID)
	}
	var heard []string
	for _, u := range m.PeerURLs {
		var v struct {
			Server  string `json:"etcdserver"`
			Cluster string `json:"etcdcluster"`
		}
		b, err := peerGet(ctx, u, "/version", files, timeout)
		if err == nil {
			err = json.Unmarshal(b, &v)
		}
		if err == nil {
			r.server, err = etcdversion.Parse(v.Server)
		}
		if err == nil {
			r.cluster, err = etcdversion.Parse(v.Cluster)
		}
		if err != nil {
			heard = append(heard, fmt.Sprintf("%s: %v", u, err))
			continue
		}
		// etcd 3.5 and later serve it; a member that does not answer it
		// has none enabled as far as this member can tell.
		if d, err := peerGet(ctx, u, "/downgrade/enabled", files, timeout); err == nil {
			r.downgrade = strings.TrimSpace(string(d)) == "true"
		}
		return r
	}
	if len(heard) == 0 {
		heard = append(heard, "it has no peer URL")
	}
	r.why = strings.Join(heard, "; ")
	return r
}

// peerGet reads path on a member's peer URL, within timeout.
func peerGet(ctx context.Context, peerURL, path string, files *tlsfiles.Client, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := &http.Transport{}
	if strings.HasPrefix(peerURL, "https://") {
		tr = files.Transport(timeout)
	}
	tr.DisableKeepAlives = true
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(peerURL, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		if explained := files.Explain(err); explained != nil {
			err = explained
		}
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s %q", path, resp.Status, b)
	}
	return b, nil
}
