package etcdbr_test

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr"
	"github.com/etcdkit/etcdkit/snapshot"
)

// etcd-backup-restore's snapshot flags mean here what they mean there.
func TestSnapshottingFlags(t *testing.T) {
	base := etcdbr.Snapshotting{Schedule: "0 */1 * * *", DeltaPeriod: 20 * time.Second, GCPeriod: time.Minute, GCPolicy: "Exponential",
		MaxBackups: 7, Compress: true, Compression: "gzip"}
	o, note, err := base.Options()
	if err != nil || note != "" || o.DeltaPeriod != 20*time.Second || o.RetentionPeriod != time.Minute || o.Codec.Compression != snapshot.Gzip ||
		o.Retention.Policy != snapshot.Exponential || o.Retention.MaxFulls != 7 || o.FullSchedule != base.Schedule {
		t.Fatalf("the defaults: %+v, %q, %v", o, note, err)
	}
	s := base
	s.DeltaPeriod, s.GCPeriod, s.GCPolicy, s.Compress = 500*time.Millisecond, 0, "LimitBased", false
	if o, _, err = s.Options(); err != nil || o.DeltaPeriod != capture.Off || o.RetentionPeriod != capture.Off ||
		o.Retention.Policy != snapshot.LimitBased || o.Codec.Compression != snapshot.None {
		t.Fatalf("deltas under a second, no GC, LimitBased, uncompressed: %+v, %v", o, err)
	}
	s = base
	s.Compression = "lzw"
	if o, note, err = s.Options(); err != nil || note == "" || o.Codec.Compression != snapshot.Gzip {
		t.Fatalf("lzw is written as gzip, and said: %+v, %q, %v", o.Codec, note, err)
	}
	for _, bad := range []etcdbr.Snapshotting{{GCPolicy: "Exponential", Compress: true, Compression: "brotli"}, {GCPolicy: "Newest"}} {
		if _, _, err := bad.Options(); !errors.Is(err, etcdbr.ErrFlag) {
			t.Errorf("%+v: %v, want ErrFlag", bad, err)
		}
	}
}
