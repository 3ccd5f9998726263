package validate

// Action is what to do with a data dir, given its verdict.
type Action string

const (
	// Start the member on the data dir as it is.
	Start Action = "start"
	// Bootstrap: there is no data; bootstrap a new cluster or join one
	// (package member decides which).
	Bootstrap Action = "bootstrap"
	// RestoreFromBackup: rebuild the data dir from the store.
	RestoreFromBackup Action = "restore-from-backup"
	// RejoinAsLearner: remove the member, wipe its data dir (moved aside)
	// and add it back as a learner; its peers hold the data.
	RejoinAsLearner Action = "rejoin-as-learner"
	// Refuse to start, for the reason given.
	Refuse Action = "refuse"
)

// Decide maps a verdict to an action. hasPeers says whether the cluster
// has other members that hold the data.
func Decide(r Report, hasPeers bool) (Action, string) {
	switch r.Verdict {
	case Valid:
		return Start, "the data dir is sound"
	case Empty:
		return Bootstrap, "the data dir is empty"
	case Behind:
		if hasPeers {
			return Start, "the peers bring the member up to date"
		}
		return RestoreFromBackup, r.Reason
	case Corrupt:
		if hasPeers {
			return RejoinAsLearner, r.Reason
		}
		return RestoreFromBackup, r.Reason
	case Locked:
		return Refuse, r.Reason + "; stop the process that holds it first"
	case WrongVolume:
		return Refuse, r.Reason + "; mount this member's own volume"
	}
	return Refuse, "unknown verdict " + string(r.Verdict)
}
