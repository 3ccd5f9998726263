// Package drill proves backups restore: a drill replays a chain without
// building a data dir (history.Verify) and compares the keyspace's digest
// with the live cluster's (Live, beside the cluster) or with the digest a
// live drill recorded (Far, in a fleet far from the clusters), and writes
// what it found beside the backups (snapshot.DrillRecord).
//
// It does not schedule drills: the sidecar runs Live every DrillPeriod
// while it uploads, and etcd-backup fleet drill picks the day's prefixes
// (fleet.Sample) and runs Far on each.
package drill
