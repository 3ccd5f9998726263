package etcdbr

import (
	"errors"
	"fmt"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/snapshot"
)

// Snapshotting is what etcd-backup-restore's snapshot flags ask for, in
// its own terms; Options says what they mean here. Any binary that takes
// etcdbrctl's command line reads them the same way.
type Snapshotting struct {
	// Schedule is --schedule, the fulls' cron schedule.
	Schedule string
	// DeltaPeriod is --delta-snapshot-period: under a second, no deltas.
	DeltaPeriod time.Duration
	// DeltaMemoryLimit is --delta-snapshot-memory-limit, in bytes.
	DeltaMemoryLimit int64
	// GCPeriod is --garbage-collection-period: 0, no retention runs.
	GCPeriod time.Duration
	// GCPolicy is --garbage-collection-policy: Exponential or LimitBased.
	GCPolicy string
	// MaxBackups is --max-backups (LimitBased keeps that many fulls).
	MaxBackups int
	// DeltaRetention is --delta-snapshot-retention-period.
	DeltaRetention time.Duration
	// Compress is --compress-snapshots, Compression --compression-policy:
	// gzip, zlib or lzw. New snapshots are written with gzip, which both
	// tools read; Note says so for the others.
	Compress    bool
	Compression string
}

// ErrFlag is a flag value etcd-backup-restore would refuse too.
var ErrFlag = errors.New("not a value etcd-backup-restore takes")

// Options are the capture options the flags mean. note, when not "", is
// what differs from etcd-backup-restore, for the log.
func (s Snapshotting) Options() (o capture.Options, note string, err error) {
	o = capture.Options{FullSchedule: s.Schedule, DeltaPeriod: s.DeltaPeriod, DeltaMemoryLimit: s.DeltaMemoryLimit, RetentionPeriod: s.GCPeriod}
	if s.DeltaPeriod < time.Second {
		// etcd-backup-restore: under a second, no deltas.
		o.DeltaPeriod = capture.Off
	}
	if s.GCPeriod == 0 {
		o.RetentionPeriod = capture.Off
	}
	if s.Compress {
		switch s.Compression {
		case "gzip":
		case "zlib", "lzw":
			note = "new snapshots are compressed with gzip, which etcd-backup-restore reads too"
		default:
			return o, "", fmt.Errorf("--compression-policy %q: %w: give gzip, zlib or lzw", s.Compression, ErrFlag)
		}
		o.Codec.Compression = snapshot.Gzip
	}
	o.Retention = snapshot.Retention{MaxFulls: s.MaxBackups, DeltaRetention: s.DeltaRetention}
	switch s.GCPolicy {
	case "Exponential":
		o.Retention.Policy = snapshot.Exponential
	case "LimitBased":
		o.Retention.Policy = snapshot.LimitBased
	default:
		return o, "", fmt.Errorf("--garbage-collection-policy %q: %w: give Exponential or LimitBased", s.GCPolicy, ErrFlag)
	}
	return o, note, nil
}
