package upgrade

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/internal/dbstream"
)

// LiveOptions configure Live.
type LiveOptions struct {
	// Step is the step asked about and what the members are configured
	// with.
	Step Options
	// WorkDir holds the database streamed from the cluster for the
	// zombie check while it is read; default the system's temporary dir.
	WorkDir string
	// Timeout bounds each question to a member, and the stream of the
	// database. Default 10 s, and 10 min for the stream.
	Timeout, StreamTimeout time.Duration
}

// Live checks a running cluster for a step of its release: each member's
// version, asked of the member itself, and the step's own checks. Up from
// 3.5: the v2 membership etcd 3.5 serves as its member list against the v3
// store's, read from a database streamed from the member cli reaches
// first. Down: the downgrade enabled to the target, and each member's
// storage migrated to it. Any other step: no downgrade enabled (etcd 3.6
// and later tell it, etcd 3.5's is read from the streamed database). A
// member that does not answer is an unread finding.
func Live(ctx context.Context, cli *clientv3.Client, o LiveOptions) (Report, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.StreamTimeout <= 0 {
		o.StreamTimeout = 10 * time.Minute
	}
	r := Report{Source: "cluster at " + strings.Join(cli.Endpoints(), ",")}
	lctx, cancel := context.WithTimeout(ctx, o.Timeout)
	list, err := cli.MemberList(lctx)
	cancel()
	if err != nil {
		return Report{}, fmt.Errorf("upgrade: list the members at %s: %w", strings.Join(cli.Endpoints(), ","), err)
	}
	answered, versions, v2, all := r.askMembers(ctx, cli, list.Members, o.Timeout)
	sf, from, to := step(versions, o.Step)
	r.add(sf)
	if !from.IsZero() {
		r.From = from.MinorString()
	}
	if !to.IsZero() {
		r.To = to.MinorString()
	}
	for _, a := range answered {
		r.add(version(a.subject, a.st.Version, to))
	}
	down := !to.IsZero() && to.Less(from)
	// etcd 3.6 and later tell a downgrade in their status; etcd 3.5's
	// is read from its database below.
	var downgrade etcdversion.Version
	for _, a := range answered {
		if down {
			r.add(storage(a.subject, a.st, to))
		}
		if d := a.st.DowngradeInfo; d != nil && d.Enabled {
			if t, err := etcdversion.Parse(d.TargetVersion); err == nil {
				downgrade = t
			}
		}
	}
	// Zombies matter on the step from 3.5, whose v2 membership 3.6 no
	// longer reads: a cluster past 3.5 has no v2 membership left.
	v36 := etcdversion.MustParse("3.6")
	switch {
	case !from.IsZero() && !from.Less(v36) && all:
		r.add(Finding{Check: CheckZombies, Status: Pass, Subject: "cluster",
			Detail: "every member runs 3.6 or later: the v3 store is the membership, and the member list shows it"})
	case to == v36 || from.IsZero() || !all:
		db, err := streamedDatabase(ctx, cli, o)
		if err != nil {
			r.add(Finding{Check: CheckZombies, Status: Unread, Subject: "cluster", Detail: err.Error(),
				Fix: "stream a snapshot by hand (etcdctl snapshot save) and check it with the live member list"})
		} else {
			r.add(compare("cluster", db.members, v2))
			if downgrade.IsZero() {
				downgrade = db.release.Downgrade
			}
		}
	}
	if f, ok := pendingDowngrade("cluster", downgrade, to); ok {
		r.add(f)
	}
	if to == v36.Next() && from == v36 {
		r.add(Finding{Check: CheckStorage, Status: Advice, Subject: "cluster",
			Detail: "etcd 3.7 cannot replay the entries etcd 3.5 wrote in their v2 form, which a member's WAL keeps until its next raft snapshot (every snapshot-count entries)",
			Fix:    "etcd-wrapper checks each member's data dir at its step and refuses 3.7 on such a WAL, changing nothing: run that member on 3.6 until it took a snapshot, then step it"})
	}
	r.add(freelist(o.Step))
	r.decide()
	return r, nil
}

// answer is a member's status, with how the findings name it.
type answer struct {
	subject string
	st      *clientv3.StatusResponse
}

// askMembers asks each member its status, adding a finding for each that
// does not answer: the answers, the versions they told, the membership by
// ID, and whether every member answered.
func (r *Report) askMembers(ctx context.Context, cli *clientv3.Client, list []*etcdserverpb.Member, timeout time.Duration) (
	answered []answer, versions []etcdversion.Version, v2 members, all bool) {
	v2, all = members{}, true
	for _, m := range list {
		v2[m.ID] = m.Name
		subject := fmt.Sprintf("member %x (%s)", m.ID, m.Name)
		if len(m.ClientURLs) == 0 {
			all = false
			r.add(Finding{Check: CheckVersion, Status: Unread, Subject: subject,
				Detail: "it has not started: it publishes no client URL", Fix: "start it, or remove it, and check again"})
			continue
		}
		st, why := memberStatus(ctx, cli, m.ID, m.ClientURLs, timeout)
		if why != "" {
			all = false
			r.add(Finding{Check: CheckVersion, Status: Unread, Subject: subject, Detail: why, Fix: "bring it back, and check again"})
			continue
		}
		answered = append(answered, answer{subject, st})
		if v, err := etcdversion.Parse(st.Version); err == nil {
			versions = append(versions, v)
		}
	}
	return answered, versions, v2, all
}

// storage is the storage finding of a member for a step down to to:
// etcd's downgrade API enables the step, and the member migrates its
// storage to the target before its release may be swapped.
func storage(subject string, st *clientv3.StatusResponse, to etcdversion.Version) Finding {
	f := Finding{Check: CheckStorage, Subject: subject}
	d := st.DowngradeInfo
	sv, err := etcdversion.Parse(st.StorageVersion)
	switch {
	case d == nil || !d.Enabled:
		f.Status, f.Detail = Fail, "no downgrade is enabled"
		f.Fix = fmt.Sprintf("etcdctl downgrade validate %[1]s, then etcdctl downgrade enable %[1]s", to.MinorString())
	case err != nil:
		f.Status, f.Detail, f.Fix = Unread, fmt.Sprintf("it reports storage version %q: %v", st.StorageVersion, err), "check its storage version by hand (etcdctl endpoint status)"
	case sv.Trim() != to.Trim():
		f.Status, f.Detail = Fail, fmt.Sprintf("the downgrade to %s is enabled, and its storage is still %s", d.TargetVersion, sv.MinorString())
		f.Fix = "wait until it migrated its storage (etcd does it once its WAL holds nothing the target cannot apply), and check again"
	default:
		f.Status, f.Detail = Pass, fmt.Sprintf("the downgrade to %s is enabled, and its storage is migrated: etcd %s may run it", d.TargetVersion, to.MinorString())
	}
	return f
}

// memberStatus asks the member id its status at each of its client URLs
// until one answers as that member: another server at its URL (a Service
// in front of several, a new process on the old port) does not speak for
// it. why says what was heard when none did.
func memberStatus(ctx context.Context, cli *clientv3.Client, id uint64, urls []string, timeout time.Duration) (*clientv3.StatusResponse, string) {
	var heard []string
	for _, u := range urls {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		st, err := cli.Status(sctx, u)
		cancel()
		switch {
		case err != nil:
			heard = append(heard, fmt.Sprintf("%s does not answer: %v", u, err))
		case st.Header.GetMemberId() != id:
			heard = append(heard, fmt.Sprintf("%s answers as member %x, not as this one", u, st.Header.GetMemberId()))
		default:
			return st, ""
		}
	}
	return nil, strings.Join(heard, "; ")
}

// streamedDatabase streams the database of the member cli reaches and
// reads it.
func streamedDatabase(ctx context.Context, cli *clientv3.Client, o LiveOptions) (database, error) {
	ctx, cancel := context.WithTimeout(ctx, o.StreamTimeout)
	defer cancel()
	f, err := os.CreateTemp(o.WorkDir, "upgrade-check-*.db")
	if err != nil {
		return database{}, fmt.Errorf("the database for the v3 membership: %w", err)
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	rc, err := dbstream.Open(ctx, cli)
	if err != nil {
		return database{}, fmt.Errorf("stream the database for the v3 membership: %w", err)
	}
	_, err = io.Copy(f, rc)
	_ = rc.Close()
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return database{}, fmt.Errorf("stream the database for the v3 membership: %w", err)
	}
	return readDatabase(f.Name())
}
