package upgrade

import (
	"fmt"
	"slices"

	"github.com/etcdkit/etcdkit/etcdversion"
)

// Verdict is a Report's answer.
type Verdict string

const (
	// Safe: every check passed.
	Safe Verdict = "safe"
	// FixFirst: a check failed; its Fix says what to do before the step.
	FixFirst Verdict = "fix-first"
	// Unknown: no check failed, but one could not be made.
	Unknown Verdict = "unknown"
)

// Status is one finding's.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	// Advice: the step works, but etcd-druid's setting differs.
	Advice Status = "advice"
	// Unread: the check could not be made (a member did not answer).
	Unread Status = "unread"
)

// The checks.
const (
	// CheckStep: the step is one minor, from the release every member
	// runs, to one etcdkit runs.
	CheckStep = "step"
	// CheckVersion: each member's release allows the step (3.5.26 and
	// later for 3.6).
	CheckVersion = "version"
	// CheckStorage: a step down waits until each member migrated its
	// storage to the target (etcd's downgrade API does it).
	CheckStorage = "storage"
	// CheckDowngrade: no downgrade is enabled but to the target. etcd
	// raises no cluster version while one is, and ends one only once every
	// member runs its target: a member stepped another way leaves it
	// enabled for good.
	CheckDowngrade = "downgrade"
	CheckZombies   = "zombie-members"
	CheckFreelist  = "freelist"
)

// MinVersion is the lowest etcd 3.5 from which 3.6 is safe: 3.5.26 syncs
// the v3 store's membership from the v2 store's at start.
var MinVersion = [3]int{3, 5, 26}

// Finding is one check's result about one subject (a member, the data
// dir, the configuration).
type Finding struct {
	Check   string `json:"check"`
	Status  Status `json:"status"`
	Subject string `json:"subject"`
	Detail  string `json:"detail"`
	// Fix says what to do; empty when the finding passed.
	Fix string `json:"fix,omitempty"`
}

// Report is the verdict and every finding it rests on.
type Report struct {
	// Source names what was read: the endpoints, the data dir, the
	// backup.
	Source string `json:"source"`
	// From and To are the step checked: the release the cluster runs
	// (as major.minor, "" when it could not be told) and the one to run.
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	Verdict  Verdict   `json:"verdict"`
	Findings []Finding `json:"findings"`
}

// Options are the inputs the data cannot give.
type Options struct {
	// To is the release to step to: one minor up from the cluster's, or
	// one down through etcd's downgrade API. Zero: the next minor.
	To etcdversion.Version
	// Freelist is etcd's backend-bbolt-freelist-type as configured
	// (etcd-druid's ConfigMap writes it); "" when not set.
	Freelist string
	// Configured: the configuration was given (a file without the key
	// runs etcd's default, map). Without it the freelist finding is
	// advice to check it.
	Configured bool
}

func (r *Report) add(f Finding) { r.Findings = append(r.Findings, f) }

// decide sets the verdict from the findings: advice never blocks.
func (r *Report) decide() {
	r.Verdict = Safe
	for _, f := range r.Findings {
		switch f.Status {
		case Fail:
			r.Verdict = FixFirst
			return
		case Unread:
			r.Verdict = Unknown
		}
	}
}

// freelist is the freelist finding: etcd-druid sets array, since with map
// the database was seen to grow much (etcd-druid#1373).
func freelist(o Options) Finding {
	f := Finding{Check: CheckFreelist, Subject: "configuration"}
	switch {
	case !o.Configured:
		// Advice, not a blocker: the step works with either type.
		f.Status, f.Detail = Advice, "the etcd configuration was not given: etcd runs the freelist type its flags say (map by default)"
		f.Fix = "give the members' etcd configuration to check backend-bbolt-freelist-type: etcd-druid sets array"
	case o.Freelist == "array":
		f.Status, f.Detail = Pass, "backend-bbolt-freelist-type is array, as etcd-druid sets it"
	default:
		kind := o.Freelist
		if kind == "" {
			kind = "map (etcd's default: the key is not set)"
		}
		f.Status, f.Detail = Advice, "backend-bbolt-freelist-type is "+kind
		f.Fix = "set backend-bbolt-freelist-type: array, as etcd-druid does: with map the database was seen to grow much (etcd-druid#1373)"
	}
	return f
}

// version is the version finding for a member running v, for a step to
// to.
func version(subject, v string, to etcdversion.Version) Finding {
	f := Finding{Check: CheckVersion, Subject: subject, Detail: "etcd " + v}
	got, err := etcdversion.Parse(v)
	min := etcdversion.Version{Major: MinVersion[0], Minor: MinVersion[1], Patch: MinVersion[2]}
	switch {
	case err != nil:
		f.Status, f.Detail, f.Fix = Unread, fmt.Sprintf("etcd reports version %q: %v", v, err), "check the member's version by hand"
	case to.Trim() != min.Trim().Next():
		f.Status = Pass
	case got.Less(min.Trim()):
		f.Status, f.Fix = Fail, fmt.Sprintf("upgrade it to %s or later first: 3.6 starts only from 3.5", min)
	case got.Less(min):
		f.Status, f.Fix = Fail, fmt.Sprintf("upgrade it to %s or later first, and let it start once: that release syncs the v3 store's membership from the v2 store's, without which 3.6 may bring removed members back (etcd's zombie members)", min)
	default:
		f.Status = Pass
	}
	return f
}

// step is the step finding: from the release the members run (their
// versions) to o.To, or the next minor; to is the step's target, zero
// when there is none to check.
func step(versions []etcdversion.Version, o Options) (f Finding, from, to etcdversion.Version) {
	f = Finding{Check: CheckStep, Subject: "cluster"}
	var minors []etcdversion.Version
	for _, v := range versions {
		if !slices.Contains(minors, v.Trim()) {
			minors = append(minors, v.Trim())
		}
	}
	slices.SortFunc(minors, etcdversion.Version.Compare)
	switch len(minors) {
	case 0:
		f.Status, f.Detail, f.Fix = Unread, "no member told its release", "check again once the members answer"
		return f, from, to
	case 1:
		from = minors[0]
	default:
		f.Status, f.Detail = Fail, fmt.Sprintf("the members run etcd %s: a step is under way", etcdversion.Names(minors))
		f.Fix = "end it first: every member on one release (the wrapper of that release on each), then check the next step"
		return f, minors[0], to
	}
	to = o.To.Trim()
	if o.To.IsZero() {
		to = from.Next()
		if etcdversion.CheckSupported(to) != nil {
			f.Status, f.Detail = Unread, fmt.Sprintf("the cluster runs etcd %s, the newest release etcdkit runs: there is no step up to check", from.MinorString())
			f.Fix = fmt.Sprintf("give the release to step to (--to %s checks the step down)", from.Previous().MinorString())
			return f, from, etcdversion.Version{}
		}
	}
	switch steps := from.Steps(to); {
	case etcdversion.CheckSupported(to) != nil:
		f.Status, f.Detail, f.Fix = Fail, etcdversion.CheckSupported(to).Error(), "step to a release etcdkit runs"
	case steps == 0:
		f.Status, f.Detail = Pass, fmt.Sprintf("the cluster runs etcd %s already", from.MinorString())
	case steps > 1:
		f.Status, f.Detail, f.Fix = Fail, fmt.Sprintf("from %s up to %s is %d minors: etcd steps one minor at a time", from.MinorString(), to.MinorString(), steps),
			fmt.Sprintf("step to %s first", from.Next().MinorString())
	case steps < -1:
		f.Status, f.Detail, f.Fix = Fail, fmt.Sprintf("from %s down to %s is %d minors: etcd steps one minor at a time", from.MinorString(), to.MinorString(), -steps),
			fmt.Sprintf("step down to %s first", from.Previous().MinorString())
	case steps == 1:
		f.Status, f.Detail = Pass, fmt.Sprintf("from %s up to %s, one minor", from.MinorString(), to.MinorString())
	default:
		f.Status, f.Detail = Pass, fmt.Sprintf("from %s down to %s, one minor, through etcd's downgrade API", from.MinorString(), to.MinorString())
	}
	return f, from, to
}

// pendingDowngrade is the finding of a downgrade to target (zero: none)
// when the step goes elsewhere; ok is false when there is nothing to say
// (the storage finding judges a step down to it).
func pendingDowngrade(subject string, target, to etcdversion.Version) (f Finding, ok bool) {
	if target.IsZero() || to.IsZero() || to.Trim() == target.Trim() {
		return Finding{}, false
	}
	t := target.MinorString()
	return Finding{Check: CheckDowngrade, Status: Fail, Subject: subject,
		Detail: fmt.Sprintf("a downgrade to %s is enabled: etcd raises no cluster version while it is, and ends it only once every member runs %s", t, t),
		Fix:    fmt.Sprintf("if every member runs %s, wait a few seconds for the leader to end it; else cancel it (etcdctl downgrade cancel); then check again", t),
	}, true
}

// ConfigOptions are the Options etcd's configuration (a parsed
// etcd.conf.yaml) gives.
func ConfigOptions(conf map[string]any) Options {
	o := Options{Configured: true}
	o.Freelist, _ = conf["backend-bbolt-freelist-type"].(string)
	return o
}
