package soak

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is what a soak did and found.
type Report struct {
	Seed uint64
	Dir  string
	Took time.Duration
	// Faults injected, by kind.
	Faults map[string]int
	// Writes the cluster acknowledged, writes it did not (a fault in
	// their way), linearizable reads, etcd compactions.
	Writes, Failed, Reads, Compactions int64
	// AcksChecked are the writes and reads compared with the watch's
	// history; KeysCompared the keys compared in restored data dirs.
	AcksChecked, KeysCompared int
	// Restores checked (the warm standby's included), store objects read
	// whole, on-demand fulls asked for.
	Restores, ObjectsChecked           int
	OnDemandFulls, OnDemandFullsFailed int
	// WorstRPO is the longest an acknowledged write took to reach the
	// store, faults included; LateWrites those later than the promise.
	WorstRPO   time.Duration
	LateWrites int
	// WorstRecovery is the longest from a fault's healing to a cluster
	// that serves and backs up again, and the fault it followed.
	WorstRecovery      time.Duration
	WorstRecoveryAfter string
	// LeasesShortened are restored leases the backups saw only after they
	// were gone, granted the shortest TTL.
	LeasesShortened int
	// Restarts are processes that exited without the harness asking; the
	// harness restarted them, as the kubelet does.
	Restarts []string
	// Violations are the invariants broken: lost = 0 when it is empty.
	Violations []string
	// Replay is the command that runs the same faults in the same order
	// (their moments and the traffic's interleaving still vary).
	Replay string
}

// FaultCount is the number of faults injected.
func (r Report) FaultCount() int {
	n := 0
	for _, c := range r.Faults {
		n += c
	}
	return n
}

// Write prints the report for people.
func (r Report) Write(w io.Writer) {
	fmt.Fprintf(w, "soak seed %d, %s, work dir %s\n", r.Seed, r.Took, r.Dir)
	kinds := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Faults[k]))
	}
	fmt.Fprintf(w, "faults: %d, of %d kinds (%s)\n", r.FaultCount(), len(r.Faults), strings.Join(parts, ", "))
	fmt.Fprintf(w, "writes acknowledged: %d (%d not acknowledged), reads %d, etcd compactions %d\n", r.Writes, r.Failed, r.Reads, r.Compactions)
	fmt.Fprintf(w, "checked against the record: %d writes and reads, %d restores (%d keys), %d store objects read whole\n", r.AcksChecked, r.Restores, r.KeysCompared, r.ObjectsChecked)
	fmt.Fprintf(w, "restored leases the backups saw only once gone (granted 1 s): %d\n", r.LeasesShortened)
	fmt.Fprintf(w, "on-demand fulls: %d (%d failed under faults)\n", r.OnDemandFulls, r.OnDemandFullsFailed)
	fmt.Fprintf(w, "worst RPO: %s (%d writes past the promise); worst time to recover: %s (after %s)\n",
		r.WorstRPO.Round(time.Millisecond), r.LateWrites, r.WorstRecovery.Round(time.Millisecond), r.WorstRecoveryAfter)
	fmt.Fprintf(w, "processes that exited by themselves (restarted): %d\n", len(r.Restarts))
	for _, s := range r.Restarts {
		fmt.Fprintf(w, "  %s\n", s)
	}
	if len(r.Violations) == 0 {
		fmt.Fprintf(w, "lost: 0, violations: 0\n")
		return
	}
	fmt.Fprintf(w, "VIOLATIONS: %d (replay: %s)\n", len(r.Violations), r.Replay)
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  %s\n", v)
	}
}
