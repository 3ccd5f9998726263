package upgrade

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// LiveOptions configure Live.
type LiveOptions struct {
	Options
	// WorkDir holds the database streamed from the cluster for the
	// zombie check while it is read; default the system's temporary dir.
	WorkDir string
	// Timeout bounds each question to a member, and the stream of the
	// database. Default 10 s, and 10 min for the stream.
	Timeout, StreamTimeout time.Duration
}

// Live checks a running cluster: each member's version, asked of the
// member itself, and the v2 membership etcd 3.5 serves as its member list
// against the v3 store's, read from a database streamed from the member
// cli reaches first. A member that does not answer is an unread finding.
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
	v2, all36 := members{}, true
	for _, m := range list.Members {
		v2[m.ID] = m.Name
		subject := fmt.Sprintf("member %x (%s)", m.ID, m.Name)
		if len(m.ClientURLs) == 0 {
			all36 = false
			r.add(Finding{Check: CheckVersion, Status: Unread, Subject: subject,
				Detail: "it has not started: it publishes no client URL", Fix: "start it, or remove it, and check again"})
			continue
		}
		v, why := memberVersion(ctx, cli, m.ID, m.ClientURLs, o.Timeout)
		if why != "" {
			all36 = false
			r.add(Finding{Check: CheckVersion, Status: Unread, Subject: subject, Detail: why, Fix: "bring it back, and check again"})
			continue
		}
		if pv, err := parseVersion(v); err != nil || pv[0] == 3 && pv[1] < 6 {
			all36 = false
		}
		r.add(version(subject, v))
	}
	if all36 {
		r.add(Finding{Check: CheckZombies, Status: Pass, Subject: "cluster",
			Detail: "every member runs 3.6 or later: the v3 store is the membership, and the member list shows it"})
	} else {
		v3, err := streamedMembers(ctx, cli, o)
		if err != nil {
			r.add(Finding{Check: CheckZombies, Status: Unread, Subject: "cluster", Detail: err.Error(),
				Fix: "stream a snapshot by hand (etcdctl snapshot save) and check it with the live member list"})
		} else {
			r.add(compare("cluster", v3, v2))
		}
	}
	r.add(freelist(o.Options))
	r.decide()
	return r, nil
}

// memberVersion asks the member id its version at each of its client URLs
// until one answers as that member: another server at its URL (a Service
// in front of several, a new process on the old port) does not speak for
// it. why says what was heard when none did.
func memberVersion(ctx context.Context, cli *clientv3.Client, id uint64, urls []string, timeout time.Duration) (version, why string) {
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
			return st.Version, ""
		}
	}
	return "", strings.Join(heard, "; ")
}

// streamedMembers streams the database of the member cli reaches and
// reads its v3 membership.
func streamedMembers(ctx context.Context, cli *clientv3.Client, o LiveOptions) (members, error) {
	ctx, cancel := context.WithTimeout(ctx, o.StreamTimeout)
	defer cancel()
	f, err := os.CreateTemp(o.WorkDir, "upgrade-check-*.db")
	if err != nil {
		return nil, fmt.Errorf("the database for the v3 membership: %w", err)
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream the database for the v3 membership: %w", err)
	}
	_, err = io.Copy(f, rc)
	_ = rc.Close()
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("stream the database for the v3 membership: %w", err)
	}
	v3, _, err := v3Members(f.Name())
	return v3, err
}
