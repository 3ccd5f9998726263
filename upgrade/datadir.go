package upgrade

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/internal/etcdstorage"
	"github.com/etcdkit/etcdkit/validate"
)

// DataDir checks a stopped member's data dir (walDir "" for the data
// dir's own) for the step of its release: whether the target release
// starts on it, as the wrapper judges it (validate), and for the step
// from 3.5, the v2 membership its newest raft snapshot holds and its log
// changes, against the v3 store's in its database. A data dir names its
// minor, not the patch release that wrote it: the check of 3.5.26 needs
// the live cluster, and is reported unread.
func DataDir(ctx context.Context, dir, walDir string, o Options) (Report, error) {
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	r := Report{Source: "data dir " + dir}
	rep, err := validate.DataDir(ctx, dir, validate.Options{Mode: validate.Full, WALDir: walDir, MultiMember: true})
	if err != nil {
		return Report{}, fmt.Errorf("upgrade: %w", err)
	}
	from := rep.Release.Written()
	to := o.To.Trim()
	if o.To.IsZero() {
		to = from.Next()
	}
	r.From, r.To = from.MinorString(), to.MinorString()
	f := Finding{Check: CheckStep, Subject: "data dir", Detail: fmt.Sprintf("etcd %s's data (%s)", from.MinorString(), rep.Release)}
	switch {
	case rep.Verdict != validate.Valid && rep.Verdict != validate.OtherVersion:
		f.Status, f.Detail, f.Fix = Fail, fmt.Sprintf("the data dir is %s: %s", rep.Verdict, rep.Reason), "a member starts on it for no release"
	case etcdversion.CheckSupported(to) != nil:
		f.Status, f.Detail, f.Fix = Unread, fmt.Sprintf("%s; %v", f.Detail, etcdversion.CheckSupported(to)), "give the release to step to (--to)"
	case rep.Release.Refuses(to) != "":
		f.Status, f.Detail, f.Fix = Fail, rep.Release.Refuses(to), fmt.Sprintf("etcd %s does not start on it", to)
	default:
		f.Status, f.Detail = Pass, fmt.Sprintf("%s, which etcd %s starts on", f.Detail, to.MinorString())
	}
	r.add(f)
	if f, ok := pendingDowngrade("data dir", rep.Release.Downgrade, to); ok {
		r.add(f)
	}
	if to != etcdversion.MustParse("3.6") {
		r.add(freelist(o))
		r.decide()
		return r, nil
	}
	member := filepath.Join(dir, "member")
	if walDir == "" {
		walDir = filepath.Join(member, "wal")
	}
	db, err := readDatabase(filepath.Join(member, "snap", "db"))
	if err != nil {
		return Report{}, fmt.Errorf("upgrade: %w", err)
	}
	v3, cindex := db.members, db.applied
	log, err := etcdstorage.ReadLog(filepath.Join(member, "snap"), walDir)
	if err != nil {
		return Report{}, fmt.Errorf("upgrade: %w", err)
	}
	v2 := members(log.Snapshot)
	// A restart applies the log to the v2 store from the snapshot on, and
	// to the v3 store past the index its database was applied to.
	for _, c := range log.Changes {
		v2.apply(c)
		if c.Index > cindex {
			v3.apply(c)
		}
	}
	r.add(Finding{Check: CheckVersion, Status: Unread, Subject: "data dir",
		Detail: "a data dir does not say which patch release of 3.5 wrote it (3.6 needs 3.5.26 or later)",
		Fix:    "check the members' versions on the live cluster (--endpoints)"})
	r.add(compare("data dir", v3, v2))
	r.add(freelist(o))
	r.decide()
	return r, nil
}

// Database checks a backup's database. A restore writes the membership
// anew from its own initial cluster, so no member the backup lists comes
// back: the zombie check passes, and a 3.6 member restores it.
func Database(ctx context.Context, dbPath, source string, o Options) (Report, error) {
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	db, err := readDatabase(dbPath)
	if err != nil {
		return Report{}, fmt.Errorf("upgrade: %s: %w", source, err)
	}
	v3 := db.members
	r := Report{Source: source}
	r.add(Finding{Check: CheckVersion, Status: Pass, Subject: "backup",
		Detail: "a restore with etcd 3.6 takes a 3.5 database"})
	r.add(Finding{Check: CheckZombies, Status: Pass, Subject: "backup",
		Detail: fmt.Sprintf("it lists members %s; a restore writes the membership anew from its initial cluster, so none of them comes back", v3)})
	r.add(freelist(o))
	r.decide()
	return r, nil
}
