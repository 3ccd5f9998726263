package soak

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// Options of a soak. The zero value of each field is the default it
// documents.
type Options struct {
	// Seed chooses the faults, their moments and the traffic. A run is
	// replayed with the same seed (the machine's timing still differs).
	Seed uint64
	// Duration is how long faults are injected; the checks at the end
	// follow. Default 2 minutes.
	Duration time.Duration
	// Faults, when not 0, ends the soak after this many faults instead.
	Faults int
	// Dir is the harness's work dir; it is kept for the logs. Default: a
	// new temporary dir.
	Dir string
	// WrapperBin and BackupBin are the binaries under test. Required.
	WrapperBin, BackupBin string
	// StoreTarget is the store server the store proxy forwards to (an
	// S3 endpoint, http://host:port) and StoreURL the store URL of the
	// processes, with {endpoint} where the proxy's address goes. Required;
	// Env carries the store's credentials to the processes.
	StoreTarget, StoreURL string
	Env                   []string
	// DirectStoreURL and Direct are the same store reached without the
	// proxy: the harness restores from the first and lists the second.
	// Required.
	DirectStoreURL string
	Direct         store.Store
	// StepFrom is an etcd server binary of the minor before the one the
	// wrapper embeds (etcd 3.6): the members start on it, run by the
	// wrapper as its child, and the rolling-step fault steps them to the
	// embedded etcd one after another, under the other faults. "": they
	// start on the embedded etcd, and rolling-step restarts them in turn.
	StepFrom string
	// Kinds are the faults to inject; nil: every kind (Kinds()).
	Kinds []string
	// Gap is the longest pause between a recovery and the next fault;
	// each pause is random up to it. Default 3 s.
	Gap time.Duration
	// Hold is the longest a fault lasts before it heals; each is random
	// from a second up to it. Default 8 s.
	Hold time.Duration
	// Writers are the traffic's concurrent clients. Default 8.
	Writers int
	// CompactEvery is how often etcd is compacted to the revision of one
	// period ago. Default 20 s.
	CompactEvery time.Duration
	// Recover bounds the time the system takes to serve and back up again
	// after a fault heals. Default 90 s.
	Recover time.Duration
	// RPO is the promised recovery point: the longest an acknowledged
	// write waits to be on the store while nothing holds the backups back.
	// Default the delta period plus 10 s.
	RPO time.Duration
	// Restores is how many restores are checked at the end, at random
	// revisions and times. Default 6.
	Restores int
	// SpoolMiB is the size of each sidecar's spool file system. Default 512.
	SpoolMiB int
	// Sidecar is how the sidecars run.
	Sidecar SidecarOptions
	// Logger gets the harness's progress. Default: discarded.
	Logger *slog.Logger
}

// SidecarOptions are the flags of etcd-backup serve the soak varies.
type SidecarOptions struct {
	DeltaPeriod    time.Duration // default 1 s
	FullSchedule   string        // default @every 1m
	GCPeriod       time.Duration // default 30 s
	MaxFulls       int           // default 4
	CompactAfter   int64         // default 20,000 revisions
	DefragSchedule string        // default @every 2m
	DrillPeriod    time.Duration // default 90 s
	MaxBackupAge   time.Duration // default 3 s
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Duration, 2*time.Minute)
	def(&o.Gap, 3*time.Second)
	def(&o.Hold, 8*time.Second)
	def(&o.CompactEvery, 20*time.Second)
	def(&o.Recover, 90*time.Second)
	s := &o.Sidecar
	def(&s.DeltaPeriod, time.Second)
	def(&s.GCPeriod, 30*time.Second)
	def(&s.DrillPeriod, 90*time.Second)
	def(&s.MaxBackupAge, 3*time.Second)
	def(&o.RPO, s.DeltaPeriod+10*time.Second)
	if s.FullSchedule == "" {
		s.FullSchedule = "@every 1m"
	}
	if s.DefragSchedule == "" {
		s.DefragSchedule = "@every 2m"
	}
	if s.MaxFulls == 0 {
		s.MaxFulls = 4
	}
	if s.CompactAfter == 0 {
		s.CompactAfter = 20000
	}
	if o.Writers == 0 {
		o.Writers = 8
	}
	if o.Restores == 0 {
		o.Restores = 6
	}
	if o.SpoolMiB == 0 {
		o.SpoolMiB = 512
	}
	if o.Kinds == nil {
		o.Kinds = Kinds()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// replay is the bench/soak command line that injects the same faults in
// the same order: the seed alone chooses them only among the same kinds,
// writers and bounds.
func (o Options) replay() string {
	cmd := fmt.Sprintf("go run ./bench/soak -seed %d -writers %d -hold %s -gap %s -duration %s", o.Seed, o.Writers, o.Hold, o.Gap, o.Duration)
	if o.StepFrom != "" {
		cmd += " -step-from " + o.StepFrom
	}
	if !slices.Equal(o.Kinds, Kinds()) {
		cmd += " -kinds " + strings.Join(o.Kinds, ",")
	}
	return cmd
}
