package defrag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/member"
)

// Policy says which members are worth defragmenting: all of its
// thresholds must be met. The zero value defragments every member.
type Policy struct {
	// MinDBSize: skip a member whose database is smaller.
	MinDBSize int64
	// MinFreeBytes: skip a member with fewer free bytes (DbSize minus
	// DbSizeInUse), which is what a defragmentation gives back.
	MinFreeBytes int64
	// MinFreeRatio: skip a member whose free bytes are a smaller share
	// of its database, 0 to 1.
	MinFreeRatio float64
}

// skip says why a member is below the policy, or "".
func (p Policy) skip(s member.Status) string {
	free := s.DBSize - s.DBSizeInUse
	switch {
	case s.DBSize < p.MinDBSize:
		return fmt.Sprintf("database of %d bytes is below the minimum of %d", s.DBSize, p.MinDBSize)
	case free < p.MinFreeBytes:
		return fmt.Sprintf("%d free bytes are below the minimum of %d", free, p.MinFreeBytes)
	case s.DBSize > 0 && float64(free)/float64(s.DBSize) < p.MinFreeRatio:
		return fmt.Sprintf("%.0f%% free is below the minimum of %.0f%%", 100*float64(free)/float64(s.DBSize), 100*p.MinFreeRatio)
	}
	return ""
}

// Options configures Run. The zero value defragments every member, no
// compaction first, 5 s apart, each within 5 minutes.
type Options struct {
	Policy Policy
	// CompactKeyspace compacts the keyspace to the current revision (physically)
	// before defragmenting, so there is more to reclaim. Compaction drops
	// history that watchers and backups behind it may need: the caller's
	// choice.
	CompactKeyspace bool
	// Pause between members, so the cluster recovers from one before the
	// next. Default 5 s; negative: none.
	Pause time.Duration
	// Timeout bounds each member's defragmentation. Default 5 min.
	Timeout time.Duration
	// StatusTimeout bounds each Status call. Default 5 s.
	StatusTimeout time.Duration
	// DryRun reports what would be done and changes nothing.
	DryRun bool
	// DisarmNOSPACE disarms NOSPACE alarms after a run in which every
	// member defragmented or was skipped, once every member's database is
	// back under its quota.
	DisarmNOSPACE bool
	// OnMember, when set, is called after each member.
	OnMember func(MemberResult)
	// Logger: nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Pause == 0 {
		o.Pause = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.StatusTimeout <= 0 {
		o.StatusTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// MemberResult is what happened to one member.
type MemberResult struct {
	Name     string
	ID       uint64
	Endpoint string
	Leader   bool
	// SizeBefore and InUseBefore are the database's size and the bytes
	// in use before; SizeAfter its size after (equal when skipped).
	SizeBefore, InUseBefore, SizeAfter int64
	// Reclaimed is SizeBefore minus SizeAfter.
	Reclaimed int64
	// Took is how long the defragmentation took.
	Took time.Duration
	// Skipped says why the member was not defragmented; "" when it was
	// (or, in a dry run, would be).
	Skipped string
}

// Result is a run's report.
type Result struct {
	// Members in the order they were visited: followers, then the leader.
	Members []MemberResult
	// CompactedTo is the revision compacted to, 0 when not compacted.
	CompactedTo int64
	// Disarmed lists the members whose NOSPACE alarm was disarmed.
	Disarmed []uint64
	DryRun   bool
}

// MarshalJSON writes the member as every JSON of the module does:
// snake_case, the ID in hex as etcdctl prints it, durations in seconds.
func (m MemberResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name        string  `json:"name"`
		ID          string  `json:"id"`
		Endpoint    string  `json:"endpoint"`
		Leader      bool    `json:"leader"`
		SizeBefore  int64   `json:"size_before"`
		InUseBefore int64   `json:"in_use_before"`
		SizeAfter   int64   `json:"size_after"`
		Reclaimed   int64   `json:"reclaimed"`
		TookSeconds float64 `json:"took_seconds"`
		Skipped     string  `json:"skipped,omitempty"`
	}{m.Name, strconv.FormatUint(m.ID, 16), m.Endpoint, m.Leader, m.SizeBefore, m.InUseBefore, m.SizeAfter, m.Reclaimed, m.Took.Seconds(), m.Skipped})
}

// MarshalJSON writes the result in the module's JSON style (see
// MemberResult).
func (r Result) MarshalJSON() ([]byte, error) {
	disarmed := make([]string, 0, len(r.Disarmed))
	for _, id := range r.Disarmed {
		disarmed = append(disarmed, strconv.FormatUint(id, 16))
	}
	members := r.Members
	if members == nil {
		members = []MemberResult{}
	}
	return json.Marshal(struct {
		Members     []MemberResult `json:"members"`
		CompactedTo int64          `json:"compacted_to"`
		Disarmed    []string       `json:"disarmed"`
		DryRun      bool           `json:"dry_run"`
	}{members, r.CompactedTo, disarmed, r.DryRun})
}

// Run defragments the cluster that cli reaches. It refuses to start
// unless every member answers Status, and stops at the first member that
// fails, returning what was done so far.
func Run(ctx context.Context, cli *clientv3.Client, o Options) (Result, error) {
	o = o.withDefaults()
	res := Result{DryRun: o.DryRun}
	members, err := healthy(ctx, cli, o)
	if err != nil {
		return res, err
	}
	if o.CompactKeyspace && !o.DryRun {
		if res.CompactedTo, err = compact(ctx, cli, members); err != nil {
			return res, err
		}
		o.Logger.Info("defrag: compacted", "revision", res.CompactedTo)
	}
	// Followers by name, the leader last: defragmenting the leader stalls
	// the whole cluster's writes, so it goes once, at the end.
	slices.SortStableFunc(members, func(a, b member.Status) int {
		switch {
		case a.Leader == b.Leader:
			return 0
		case a.Leader:
			return 1
		}
		return -1
	})
	for i, m := range members {
		if i > 0 && o.Pause > 0 && !o.DryRun {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(o.Pause):
			}
		}
		r, err := one(ctx, cli, m, o)
		res.Members = append(res.Members, r)
		if o.OnMember != nil {
			o.OnMember(r)
		}
		if err != nil {
			return res, err
		}
	}
	if o.DisarmNOSPACE && !o.DryRun {
		if res.Disarmed, err = disarm(ctx, cli, o); err != nil {
			return res, err
		}
	}
	return res, nil
}

// healthy returns every member's status, or an error naming those that
// did not answer.
func healthy(ctx context.Context, cli *clientv3.Client, o Options) ([]member.Status, error) {
	members, err := member.Inspect(ctx, cli, member.InspectOptions{Timeout: o.StatusTimeout})
	if err != nil {
		return nil, fmt.Errorf("defrag: %w", err)
	}
	var errs []error
	for _, m := range members {
		if !m.Healthy() {
			errs = append(errs, m.Err)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("defrag: not every member answers, so none is defragmented: %w", errors.Join(errs...))
	}
	return members, nil
}

// compact compacts physically to the newest revision the members report.
func compact(ctx context.Context, cli *clientv3.Client, members []member.Status) (int64, error) {
	var rev int64
	for _, m := range members {
		rev = max(rev, m.Revision)
	}
	_, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	if errors.Is(err, rpctypes.ErrCompacted) {
		return rev, nil
	}
	if err != nil {
		return 0, fmt.Errorf("defrag: compact to revision %d: %w", rev, err)
	}
	return rev, nil
}

// one defragments a member, its sizes read just before: another member's
// defragmentation or the compaction may have changed them.
func one(ctx context.Context, cli *clientv3.Client, m member.Status, o Options) (MemberResult, error) {
	r := MemberResult{Name: m.Name, ID: m.ID, Endpoint: m.Endpoint, Leader: m.Leader}
	before, err := status(ctx, cli, m.Endpoint, o.StatusTimeout)
	if err != nil {
		return r, fmt.Errorf("defrag: member %s: %w", m.Name, err)
	}
	r.SizeBefore, r.InUseBefore, r.SizeAfter = before.DbSize, before.DbSizeInUse, before.DbSize
	m.DBSize, m.DBSizeInUse = before.DbSize, before.DbSizeInUse
	if r.Skipped = o.Policy.skip(m); r.Skipped != "" || o.DryRun {
		o.Logger.Info("defrag: member not defragmented", "member", m.Name, "skipped", r.Skipped, "dry_run", o.DryRun, "size", r.SizeBefore, "in_use", r.InUseBefore)
		return r, nil
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, o.Timeout)
	_, err = cli.Defragment(dctx, m.Endpoint)
	cancel()
	r.Took = time.Since(start)
	if err != nil {
		return r, fmt.Errorf("defrag: member %s at %s: %w", m.Name, m.Endpoint, err)
	}
	after, err := status(ctx, cli, m.Endpoint, o.StatusTimeout)
	if err != nil {
		return r, fmt.Errorf("defrag: member %s after defragmentation: %w", m.Name, err)
	}
	r.SizeAfter, r.Reclaimed = after.DbSize, r.SizeBefore-after.DbSize
	o.Logger.Info("defrag: member defragmented", "member", m.Name, "leader", m.Leader, "before", r.SizeBefore, "after", r.SizeAfter, "took", r.Took)
	return r, nil
}

func status(ctx context.Context, cli *clientv3.Client, endpoint string, timeout time.Duration) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return cli.Status(ctx, endpoint)
}

// disarm disarms NOSPACE alarms once every member's database is under its
// quota; etcd would raise the alarm again at once otherwise.
func disarm(ctx context.Context, cli *clientv3.Client, o Options) ([]uint64, error) {
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("defrag: list alarms: %w", err)
	}
	var nospace []*pb.AlarmMember
	for _, a := range alarms.Alarms {
		if a.Alarm == pb.AlarmType_NOSPACE {
			nospace = append(nospace, a)
		}
	}
	if len(nospace) == 0 {
		return nil, nil
	}
	members, err := healthy(ctx, cli, o)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.DBSizeQuota > 0 && m.DBSize >= m.DBSizeQuota {
			return nil, fmt.Errorf("defrag: NOSPACE stays armed: member %s's database is %d bytes, its quota %d", m.Name, m.DBSize, m.DBSizeQuota)
		}
	}
	var disarmed []uint64
	for _, a := range nospace {
		if _, err := cli.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			return disarmed, fmt.Errorf("defrag: disarm NOSPACE of member %x: %w", a.MemberID, err)
		}
		disarmed = append(disarmed, a.MemberID)
		o.Logger.Info("defrag: NOSPACE disarmed", "member", fmt.Sprintf("%x", a.MemberID))
	}
	return disarmed, nil
}
