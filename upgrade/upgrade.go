package upgrade

import (
	"fmt"
	"strconv"
	"strings"
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
	CheckVersion  = "version"
	CheckZombies  = "zombie-members"
	CheckFreelist = "freelist"
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
	Source   string    `json:"source"`
	Verdict  Verdict   `json:"verdict"`
	Findings []Finding `json:"findings"`
}

// Options are the inputs the data cannot give.
type Options struct {
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

// version is the version finding for a member running v.
func version(subject, v string) Finding {
	f := Finding{Check: CheckVersion, Subject: subject, Detail: "etcd " + v}
	got, err := parseVersion(v)
	switch {
	case err != nil:
		f.Status, f.Detail, f.Fix = Unread, fmt.Sprintf("etcd reports version %q: %v", v, err), "check the member's version by hand"
	case got[0] == 3 && got[1] < 5 || got[0] < 3:
		f.Status, f.Fix = Fail, fmt.Sprintf("upgrade it to 3.5.%d or later first: 3.6 starts only from 3.5", MinVersion[2])
	case got[0] == 3 && got[1] == 5 && got[2] < MinVersion[2]:
		f.Status, f.Fix = Fail, fmt.Sprintf("upgrade it to 3.5.%d or later first, and let it start once: that release syncs the v3 store's membership from the v2 store's, without which 3.6 may bring removed members back (etcd's zombie members)", MinVersion[2])
	default:
		f.Status = Pass
	}
	return f
}

func parseVersion(v string) ([3]int, error) {
	var out [3]int
	core, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("not major.minor.patch")
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return out, fmt.Errorf("not major.minor.patch")
		}
		out[i] = n
	}
	return out, nil
}

// ConfigOptions are the Options etcd's configuration (a parsed
// etcd.conf.yaml) gives.
func ConfigOptions(conf map[string]any) Options {
	o := Options{Configured: true}
	o.Freelist, _ = conf["backend-bbolt-freelist-type"].(string)
	return o
}
