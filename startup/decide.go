package startup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/member"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/validate"
)

// Config is this member's etcd configuration as it is about to start.
type Config struct {
	// Member is the member: its name, data dir, WAL dir ("" when the WAL
	// is the data dir's: it is validated, restored and moved aside with
	// the data dir), advertised peer URLs, --initial-cluster and
	// --initial-cluster-token (the data dir's guard must match it, and a
	// restore builds the cluster under it).
	Member member.Spec
	// ClientURLs are the member's advertised client URLs.
	ClientURLs []string
	// ClusterState is etcd's --initial-cluster-state as configured: "new"
	// (the default) or "existing".
	ClusterState string
	// Endpoints are client URLs that reach the cluster's other members
	// (each member's, or one service's). None: the cluster is not asked,
	// and a multi-member cluster is taken as not running.
	Endpoints []string
	// CleanShutdown: the member stopped cleanly last time (the wrapper's
	// marker says so), so the sanity checks of its data dir suffice;
	// otherwise the full ones run.
	CleanShutdown bool
	// Etcd is the etcd release the member is to run: its data dir is
	// judged for it, a restore writes for it, and it joins a cluster only
	// where etcd lets that release join. Zero: restore.Module, the release
	// this module is built with.
	Etcd etcdversion.Version
}

// etcd is the release the member is to run.
func (c Config) etcd() etcdversion.Version {
	if c.Etcd.IsZero() {
		return restore.Module
	}
	return c.Etcd
}

// multiMember says whether the initial cluster lists other members: their
// peers then bring a member up to date, and hold the data it loses.
func (c Config) multiMember() bool { return len(parseCluster(c.Member.InitialCluster)) > 1 }

// Action is what a member must do before etcd starts.
type Action string

const (
	// Bootstrap a new cluster: start with initial-cluster-state "new".
	Bootstrap Action = "bootstrap"
	// Restart on the data dir as it is.
	Restart Action = "restart"
	// JoinAsLearner: add the member to the running cluster as a learner
	// (Apply does, unless it is listed and unstarted already), start it
	// with an empty data dir and state "existing", promote it when ready.
	JoinAsLearner Action = "join-as-learner"
	// Rejoin: the cluster holds the data this member lost or never had in
	// sound form. Move its data dir aside, remove it (when listed), then
	// as JoinAsLearner.
	Rejoin Action = "rejoin"
	// Restore the data dir from the backups: the member is alone.
	Restore Action = "restore"
	// Refuse to start, for the reason given.
	Refuse Action = "refuse"
)

// Plan is Decide's answer: the action, why, and the etcd flags the member
// must start with.
type Plan struct {
	Action Action
	Reason string
	// InitialCluster and ClusterState replace the configured ones: the
	// initial cluster lists the real members (and this one), the state is
	// "existing" whenever a cluster runs.
	InitialCluster string
	ClusterState   string
	// ID is this member's ID when the cluster lists it, else 0.
	ID uint64
	// Learner: the member starts (or runs) as a learner and is to be
	// promoted with PromoteWhenReady.
	Learner bool
	// Retry: refused for now; decide again in a moment (another member is
	// restoring the cluster this one will join).
	Retry bool
	// Remedies, for a refusal, are what the member could be given to
	// start: a store, or the leave to wipe its data dir.
	Remedies []Remedy
	// Hold, for a refusal, says it stands until an operator acts and a
	// restart changes nothing (the cluster removed the member on
	// purpose): a caller that can stays up and says why on its probes,
	// rather than exit into a restart loop.
	Hold bool
}

// MetricMemberRemoved is the gauge the wrapper and the sidecar keep of a
// member the cluster removed on purpose, which stays out (a plan that
// holds): its name and help, one for both.
const (
	MetricMemberRemoved = "etcdkit_member_removed"
	HelpMemberRemoved   = "1 while the member's data dir says the cluster removed it on purpose (its members_removed bucket lists it, or cannot be read), so it stays out and etcd does not start; else 0."
)

// Remedy is what an operator may give a member whose plan refuses; each
// binary names it by its own flag.
type Remedy string

const (
	// GiveStore: a store that holds the cluster's backups, to restore
	// from.
	GiveStore Remedy = "store"
	// AllowWipe: a corrupt member of a cluster of several may move its
	// data dir aside and rejoin (Options.WipeOnCorrupt): its peers hold
	// the data.
	AllowWipe Remedy = "wipe-on-corrupt"
)

// cluster is what the endpoints say about the running cluster.
type cluster struct {
	// answered lists the endpoints whose member answered Status: a
	// cluster runs there.
	answered []string
	// members is the member list, nil when no quorum could give it; id
	// the ID of the cluster that gave it.
	members []*pb.Member
	id      uint64
	// listErr is why the list could not be had.
	listErr error
	// silent are the endpoints and peer URLs that accepted a connection
	// and answered nothing in time, each with why: a member may run there.
	silent []string
	// bootstrapping are peer URLs whose member waits for the others of a
	// new cluster: it holds no data.
	bootstrapping []string
	// withData are peer URLs whose member holds a cluster's data although
	// no endpoint answered for it.
	withData []string
	// unreadable are peer URLs where a TLS server answered but would not
	// let this member read its state: this member lacks the peers' CA or
	// a peer certificate (etcd-druid mounts none in its sidecar).
	unreadable []string
	// timeout is how long each was given.
	timeout time.Duration
}

// unsure says why the cluster may run although no endpoint answered, ""
// when the evidence says it does not: every endpoint and peer URL refused
// the connection or does not resolve, or answers that it waits for a new
// cluster's other members. A member that accepts a connection and answers
// nothing in time is unknown, not absent: a member without quorum, a
// stopped process and a slow machine look the same, and bootstrapping
// beside one of them starts a second cluster. The one silence excused is
// the client port of a member that is bootstrapping too (its peer port
// says so): it serves clients only once the cluster has formed. A peer
// port that answers TLS but not this member's questions counts as such a
// member only when the store holds no backups: a cluster that ran has
// left some (where it has no store, give this member the peers' TLS
// files to know).
func (c cluster) unsure(chk Check) string {
	if len(c.answered) > 0 {
		return ""
	}
	var why []string
	if len(c.withData) > 0 {
		why = append(why, fmt.Sprintf("the members at peer URLs %s hold a cluster's data and no endpoint of theirs answers (give --peer-endpoints that reach them)", strings.Join(c.withData, ", ")))
	}
	if len(c.unreadable) > 0 && chk.Backups {
		why = append(why, fmt.Sprintf("the members at peer URLs %s serve TLS and do not let this member read their state, and the store holds backups (give this member peer-transport-security's CA and a peer certificate)", strings.Join(c.unreadable, ", ")))
	}
	waiting := len(c.bootstrapping) > 0 || (len(c.unreadable) > 0 && !chk.Backups)
	silentPeers := slices.ContainsFunc(c.silent, func(s string) bool { return strings.HasPrefix(s, "peer ") })
	if len(c.silent) > 0 && (silentPeers || !waiting || len(why) > 0) {
		why = append(why, fmt.Sprintf("%d accepted a connection and answered nothing within %s, as a member without quorum, a stopped process or a slow machine does (%s)",
			len(c.silent), c.timeout, strings.Join(c.silent, "; ")))
	}
	if len(why) == 0 {
		return ""
	}
	return "no member answers as a client, but " + strings.Join(why, ", and ") + ": a cluster may run there, so this member waits rather than start a second one"
}

// Decide says what this member must do before etcd starts, from what
// its Preparer found (the data dir's verdict, the backups) and the cluster
// its endpoints reach. It changes nothing: Prepare carries the plan out.
func Decide(ctx context.Context, cfg Config, chk Check, o Options) (Plan, error) {
	o = o.withDefaults()
	if cfg.Member.Name == "" || len(cfg.Member.PeerURLs) == 0 {
		return Plan{}, errors.New("startup: the configuration needs the member's name and peer URLs")
	}
	switch chk.Verdict {
	case validate.Locked, validate.WrongVolume, validate.OtherVersion, validate.Removed:
		// Nothing the cluster says changes this.
		return decide(cfg, chk, cluster{}, o.WipeOnCorrupt), nil
	case validate.Corrupt:
		if !chk.Store && !o.WipeOnCorrupt {
			return decide(cfg, chk, cluster{}, o.WipeOnCorrupt), nil
		}
	}
	c, err := probe(ctx, cfg, o)
	if err != nil {
		return Plan{}, err
	}
	o.Logger.Info("startup: cluster probed", "endpoints", cfg.Endpoints, "answered", c.answered,
		"members", len(c.members), "list_error", c.listErr, "silent", c.silent, "bootstrapping", c.bootstrapping, "with_data", c.withData)
	p := decide(cfg, chk, c, o.WipeOnCorrupt)
	if p.Action == Rejoin && p.ID != 0 {
		// A rejoin removes the listed member: never one that runs (this
		// configuration's data dir may be a typo, or a second copy of
		// the member started beside the first).
		p = unlessRuns(ctx, p, c.members, o)
	}
	if p.Action == Rejoin || p.Action == JoinAsLearner {
		// No membership change before the member knows it can join.
		rs := askReleases(ctx, cfg, c.members, p.ID, o)
		o.Logger.Info("startup: the members' releases", "etcd", cfg.etcd(), "releases", rs)
		p = joinPlan(p, cfg.etcd(), rs)
	}
	o.Logger.Info("startup: decided", "action", p.Action, "reason", p.Reason,
		"initial_cluster", p.InitialCluster, "state", p.ClusterState)
	return p, nil
}

// decide is Decide's table, apart from the network. wipe is
// Options.WipeOnCorrupt.
//
//nolint:gocyclo // a decision table: one case per verdict on the data dir and state of the cluster, read in order (decide_test.go holds every row)
func decide(cfg Config, chk Check, c cluster, wipe bool) Plan {
	verdict := chk.Verdict
	running := len(c.answered) > 0
	self := c.find(cfg)
	state := cfg.ClusterState
	if state == "" {
		state = "new"
	}
	alone := !cfg.multiMember()
	unsure := c.unsure(chk)
	noQuorum := fmt.Sprintf("a cluster answers at %s but cannot list its members (%v): it has no quorum; bring its members back, or recover it from a backup (startup.RecoverQuorum)", strings.Join(c.answered, ", "), c.listErr)

	switch verdict {
	case validate.Locked, validate.WrongVolume, validate.OtherVersion:
		// The verdict alone does not say whose data dir, or who holds it;
		// a release is a fact of the data, which no move or rejoin mends.
		return Plan{Action: Refuse, Reason: fmt.Sprintf("the data dir is %s: %s", verdict, chk.Reason)}
	case validate.Removed:
		return Plan{Action: Refuse, Hold: true, Reason: fmt.Sprintf("the data dir is %s: %s", verdict, chk.Reason)}
	case validate.Valid:
		if running && c.members != nil && chk.ClusterID != 0 && c.id != 0 && chk.ClusterID != c.id {
			// Not this cluster's data at all: nothing here says which
			// member it was, or whether it holds writes no one else has.
			return Plan{Action: Refuse, Reason: fmt.Sprintf("the data dir is sound but holds cluster %x's data, and the cluster that answers at %s is %x: nothing was changed; point the member at its own data dir, or move this one aside by hand for the member to join with an empty one",
				chk.ClusterID, strings.Join(c.answered, ", "), c.id)}
		}
		if running && c.members != nil && self == nil && chk.MemberID != 0 {
			// Not etcdkit's own rejoin, which moves the data dir aside
			// before it removes the member: an operator's removal (etcd-
			// druid's scale-in) that the member did not live to write into
			// its own data dir.
			return Plan{Action: Refuse, Hold: true, Reason: fmt.Sprintf("the cluster no longer lists member %x, whose data this is, and etcdkit removes a member only after it moved its data dir aside: the cluster removed it on purpose; it stays out; a member that is to come back joins with an empty data dir (move this one aside by hand)", chk.MemberID)}
		}
		if running && c.members != nil && self == nil {
			return c.plan(cfg, Rejoin, nil, "the cluster no longer lists this member (it was removed): its data is stale")
		}
		if running && self != nil && chk.MemberID != 0 && self.ID != chk.MemberID {
			// etcd would stop at once: the cluster removed the member this
			// data is of, and lists this name under another ID.
			return c.plan(cfg, Rejoin, self, fmt.Sprintf("the cluster lists this member as %x, but its data dir is member %x's, which the cluster removed: its data is stale", self.ID, chk.MemberID))
		}
		p := Plan{Action: Restart, Reason: "the data dir is sound", InitialCluster: cfg.Member.InitialCluster, ClusterState: "existing"}
		if c.members != nil {
			p.InitialCluster = initialCluster(c.members, cfg)
		}
		if self != nil {
			p.ID, p.Learner = self.ID, self.IsLearner
		}
		return p
	case validate.Empty:
		switch {
		case running && c.members == nil:
			// Quorum may come back as its members restart: wait for it.
			return Plan{Action: Refuse, Retry: true, Reason: "the data dir is empty and " + noQuorum}
		case running && self != nil && self.Name == "":
			return c.plan(cfg, JoinAsLearner, self, "the cluster lists this member as added but not started")
		case running && self != nil && len(self.ClientURLs) == 0 && state != "existing":
			// A member of the initial cluster that never started has its
			// name but has published no client URLs: it holds no vote to
			// lose, and starts as the others did.
			return Plan{Action: Bootstrap, Reason: "the cluster lists this member from its initial cluster and it never started: it joins the bootstrap",
				InitialCluster: cfg.Member.InitialCluster, ClusterState: "new", ID: self.ID}
		case running && self != nil:
			return c.plan(cfg, Rejoin, self, "the cluster lists this member but its data dir is empty: it must not vote before it holds the log again")
		case running:
			return c.plan(cfg, JoinAsLearner, nil, "the data dir is empty and a cluster runs without this member: scale up")
		case unsure != "":
			return Plan{Action: Refuse, Retry: true, Reason: "the data dir is empty and " + unsure}
		case state == "existing":
			return Plan{Action: Refuse, Reason: fmt.Sprintf("the member is configured to join an existing cluster, but none answers at %v", cfg.Endpoints)}
		case chk.Backups && firstMember(cfg.Member.InitialCluster) == cfg.Member.Name:
			return Plan{Action: Restore, Reason: "no member answers and the store holds backups: this member, the first of the initial cluster, restores them alone and the others join it",
				InitialCluster: initialCluster(nil, cfg), ClusterState: "new"}
		case chk.Backups:
			return Plan{Action: Refuse, Retry: true, Reason: fmt.Sprintf("no member answers and the store holds backups: waiting for %s, the first of the initial cluster, to restore them", firstMember(cfg.Member.InitialCluster))}
		}
		return Plan{Action: Bootstrap, Reason: "the data dir is empty and no member of the cluster answers: bootstrap", InitialCluster: cfg.Member.InitialCluster, ClusterState: "new"}
	case validate.Corrupt, validate.Behind:
		switch {
		case verdict == validate.Corrupt && !chk.Store && !wipe && alone:
			return Plan{Action: Refuse, Remedies: []Remedy{GiveStore}, Reason: fmt.Sprintf(
				"%s; the member is alone: give it a store to restore its backups from", chk.Reason)}
		case verdict == validate.Corrupt && !chk.Store && !wipe:
			return Plan{Action: Refuse, Remedies: []Remedy{GiveStore, AllowWipe}, Reason: fmt.Sprintf(
				"%s; give the member a store to restore its backups from, or, when the other members hold the data, leave to move the data dir aside and rejoin (wipe on corrupt)", chk.Reason)}
		case running && c.members == nil:
			return Plan{Action: Refuse, Retry: true, Reason: fmt.Sprintf("the data dir is %s and %s", verdict, noQuorum)}
		case running:
			return c.plan(cfg, Rejoin, self, fmt.Sprintf("the data dir is %s and the cluster holds the data", verdict))
		case alone && !chk.Store:
			return Plan{Action: Refuse, Remedies: []Remedy{GiveStore}, Reason: fmt.Sprintf("the data dir is %s and the member is alone, with no store to restore from", verdict)}
		case alone:
			return Plan{Action: Restore, Reason: fmt.Sprintf("the data dir is %s and the member is alone", verdict), InitialCluster: cfg.Member.InitialCluster, ClusterState: "new"}
		case unsure != "":
			return Plan{Action: Refuse, Retry: true, Reason: fmt.Sprintf("the data dir is %s and %s", verdict, unsure)}
		}
		return Plan{Action: Refuse, Reason: fmt.Sprintf("the data dir is %s and no other member answers at %v: wait for them, or recover the cluster from a backup (startup.RecoverQuorum)", verdict, cfg.Endpoints)}
	}
	return Plan{Action: Refuse, Reason: "unknown verdict " + string(verdict)}
}

// plan is a join or rejoin of the running cluster; self is this member's
// entry when listed.
func (c cluster) plan(cfg Config, a Action, self *pb.Member, reason string) Plan {
	p := Plan{Action: a, Reason: reason, ClusterState: "existing", Learner: true, InitialCluster: initialCluster(c.members, cfg)}
	if self != nil {
		p.ID = self.ID
	}
	return p
}

// find returns this member's entry: by name, or, for a member added but
// not started (no name yet), by peer URL.
func (c cluster) find(cfg Config) *pb.Member {
	for _, m := range c.members {
		if m.Name == cfg.Member.Name {
			return m
		}
	}
	for _, m := range c.members {
		for _, u := range m.PeerURLs {
			if slices.Contains(cfg.Member.PeerURLs, u) {
				return m
			}
		}
	}
	return nil
}

// initialCluster lists the real members, this one under its name and peer
// URLs whether listed or not, as --initial-cluster takes them.
func initialCluster(members []*pb.Member, cfg Config) string {
	var parts []string
	for _, m := range members {
		if m.Name == cfg.Member.Name || slices.ContainsFunc(m.PeerURLs, func(u string) bool { return slices.Contains(cfg.Member.PeerURLs, u) }) {
			continue
		}
		for _, u := range m.PeerURLs {
			// An unstarted member has no name yet; etcd matches it by URL.
			parts = append(parts, m.Name+"="+u)
		}
	}
	for _, u := range cfg.Member.PeerURLs {
		parts = append(parts, cfg.Member.Name+"="+u)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// firstMember is the first name of --initial-cluster, as written.
func firstMember(s string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(s), "=")
	return name
}

// parseCluster splits --initial-cluster into its names.
func parseCluster(s string) map[string][]string {
	out := map[string][]string{}
	for part := range strings.SplitSeq(s, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			out[name] = append(out[name], u)
		}
	}
	return out
}

// probe asks every endpoint at once for its status and member list, so a
// start-up waits for its slowest peer, not for the sum of them. The
// answers are then read in the endpoints' order: the member list is the
// first that one gave. An endpoint that refuses this member's TLS or
// credentials is an error, not a member that is down: deciding without
// its answer could start a second cluster beside the running one. When
// no endpoint answers, the other members' peer URLs are asked whether a
// member runs there, and what it holds.
func probe(ctx context.Context, cfg Config, opts Options) (cluster, error) {
	endpoints := cfg.Endpoints
	answers := make([]answer, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() { answers[i] = ask(ctx, ep, opts) })
	}
	wg.Wait()
	c := cluster{timeout: opts.Timeout}
	for i, a := range answers {
		switch {
		case errors.Is(a.err, etcdclient.ErrUnreachable):
			if !absent(a.err) {
				c.silent = append(c.silent, endpoints[i]+": "+a.err.Error())
			}
		case errors.Is(a.err, etcdclient.ErrSettings):
			return c, fmt.Errorf("startup: %w", a.err)
		case a.err != nil:
			// It answers but cannot log this member in: no quorum.
			c.answered = append(c.answered, endpoints[i])
			c.listErr = a.err
		case a.statusErr != nil:
			// It accepted the connection: not serving yet (a member of a
			// new cluster serves clients once the cluster formed), or
			// stopped, or slow.
			c.silent = append(c.silent, endpoints[i]+": "+a.statusErr.Error())
		default:
			c.answered = append(c.answered, endpoints[i])
			if c.members == nil {
				c.members, c.listErr, c.id = a.members, a.listErr, a.clusterID
			}
		}
	}
	if len(c.answered) > 0 || !cfg.multiMember() {
		return c, nil
	}
	askPeers(ctx, cfg, opts, &c)
	return c, nil
}

// unlessRuns is the rejoin p, unless the member it would remove answers
// as itself on one of its client URLs: then a refusal that changes
// nothing.
func unlessRuns(ctx context.Context, p Plan, members []*pb.Member, o Options) Plan {
	for _, m := range members {
		if m.ID != p.ID {
			continue
		}
		for _, u := range m.ClientURLs {
			if askStatus(ctx, u, o) == m.ID {
				return Plan{Action: Refuse, Reason: fmt.Sprintf("%s, but member %s (%x) runs and answers at %s: this is not its data dir, or a second copy of it; nothing was changed: check the data dir this member is given",
					p.Reason, m.Name, m.ID, u)}
			}
		}
	}
	return p
}

// askStatus is the member ID the server at ep answers Status as, 0 when
// it does not answer.
func askStatus(ctx context.Context, ep string, o Options) uint64 {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cli, err := dialOne(ctx, ep, o)
	if err != nil {
		return 0
	}
	defer func() { _ = cli.Close() }()
	st, err := cli.Status(ctx, ep)
	if err != nil {
		return 0
	}
	return st.Header.GetMemberId()
}

// askPeers asks the peer URLs of the initial cluster's other members at
// once.
func askPeers(ctx context.Context, cfg Config, opts Options, c *cluster) {
	var urls []string
	for name, us := range parseCluster(cfg.Member.InitialCluster) {
		if name != cfg.Member.Name {
			urls = append(urls, us...)
		}
	}
	slices.Sort(urls)
	files := peerFiles(opts)
	answers := make([]peerAnswer, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { answers[i] = askPeer(ctx, u, files, opts.Timeout) })
	}
	wg.Wait()
	for _, a := range answers {
		switch a.state {
		case peerBootstrapping:
			c.bootstrapping = append(c.bootstrapping, a.url)
		case peerHasData:
			c.withData = append(c.withData, a.url)
		case peerUnreadable:
			c.unreadable = append(c.unreadable, a.url)
			opts.Logger.Warn("startup: a peer serves TLS but does not let this member read its state", "peer", a.url, "error", a.why)
		case peerSilent:
			c.silent = append(c.silent, "peer "+a.url+": "+a.why)
		}
	}
}

// peerFiles are the TLS files https:// peer URLs are asked with: etcd's
// peer-transport-security's, else the client's, else none but the
// system's roots, which still tell a TLS server that answers from one
// that does not.
func peerFiles(opts Options) *tlsfiles.Client {
	for _, f := range []tlsfiles.Files{opts.PeerTLS, opts.Conn.TLS} {
		if f.IsZero() {
			continue
		}
		files, err := f.NewClient(opts.Logger)
		if err == nil {
			return files
		}
		opts.Logger.Warn("startup: the TLS files for the peers' state cannot be read; trying the next", "error", err)
	}
	files, _ := tlsfiles.Files{}.NewClient(opts.Logger)
	return files
}

// dialOne is a client of endpoint ep alone, dialled within opts.Timeout.
func dialOne(ctx context.Context, ep string, opts Options) (*clientv3.Client, error) {
	conn := opts.Conn.With(ep)
	conn.DialTimeout = opts.Timeout
	// A refused connection must say so: it is what tells an absent member
	// from a silent one.
	conn.AllowUnreachable = false
	return etcdclient.New(ctx, conn)
}

// answer is what one endpoint said: err, the dial's; statusErr, Status's;
// members or listErr, MemberList's.
type answer struct {
	err, statusErr, listErr error
	members                 []*pb.Member
	// clusterID is the ID of the cluster whose member list it gave.
	clusterID uint64
}

// ask puts the questions to one endpoint within opts.Timeout in all: a
// peer that accepts the connection and answers nothing costs that, once.
func ask(ctx context.Context, ep string, opts Options) answer {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	cli, err := dialOne(ctx, ep, opts)
	if err != nil {
		return answer{err: err}
	}
	defer func() { _ = cli.Close() }()
	var a answer
	if _, a.statusErr = cli.Status(ctx, ep); a.statusErr != nil {
		return a
	}
	resp, err := cli.MemberList(ctx)
	if err != nil {
		a.listErr = err
		return a
	}
	a.members, a.clusterID = resp.Members, resp.Header.GetClusterId()
	return a
}
