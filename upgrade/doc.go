// Package upgrade says whether an etcd cluster may take the step from 3.5
// to 3.6, and what to fix first. It checks what etcd's upgrade notes and
// etcd-druid's upgrade (etcd-druid#1354) name: every member runs 3.5.26 or
// later, which syncs the v3 store's membership from the v2 store's; no
// zombie member (one the v3 store lists and etcd 3.5's v2 membership does
// not, which 3.6, reading v3 only, brings back into consensus); and the
// bbolt freelist type etcd-druid sets.
//
// It reads a live cluster (Live), a stopped member's data dir (DataDir) or
// a backup's database (Database), and changes none of them; a data dir's
// WAL and raft snapshot through internal/etcdstorage. What it could
// not read is a finding of its own, never a pass: a member that does not
// answer is not a member that is fine.
//
// It does not upgrade anything, and it does not decide for an operator:
// the Report is the verdict and the fixes, for a human or for an
// orchestrator's upgrade gate (the compat server serves it).
package upgrade
