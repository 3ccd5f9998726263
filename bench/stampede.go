package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
)

// stampedePrefixes, stampedeSplay and stampedeLimit are the fleet the
// bench spreads and the cap it measures.
const (
	stampedePrefixes = 100
	stampedeSplay    = 10 * time.Minute
	stampedeLimit    = 16 << 20 // bytes a second
)

// stampedeBench measures what keeps a fleet on one bucket from
// stampeding: how --full-splay spreads the fulls of 100 sidecars on
// "0 * * * *" (the fulls that come due in the busiest minute of a day,
// with a 10-minute splay against none), and whether --upload-limit and
// --download-limit hold: an object of -size MiB put to and got from S3
// (versitygw) at 16 MiB/s, against the time the cap allows.
func stampedeBench(ctx context.Context, cfg config) ([]row, error) {
	hourly, err := cron.ParseStandard("0 * * * *")
	if err != nil {
		return nil, err
	}
	busiest := func(splay time.Duration) int {
		due := map[time.Time]int{}
		day := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
		for i := range stampedePrefixes {
			s := capture.Splayed(hourly, fmt.Sprintf("s3://fleet/cluster-%03d", i), splay)
			for at := s.Next(day); at.Before(day.Add(24 * time.Hour)); at = s.Next(at) {
				due[at.Truncate(time.Minute)]++
			}
		}
		most := 0
		for _, n := range due {
			most = max(most, n)
		}
		return most
	}
	spread, stampede := busiest(stampedeSplay), busiest(0)
	rows := []row{{Subject: fmt.Sprintf("%d sidecars' fulls on \"0 * * * *\"", stampedePrefixes), Op: "fulls due in the busiest minute",
		Ours: time.Duration(spread) * time.Second, Reference: "no splay", Ref: time.Duration(stampede) * time.Second, Count: true,
		Note: fmt.Sprintf("--full-splay %s: %d at most in a minute, against all %d at once; counted from each prefix's schedule over a day (capture.Splayed), not timed",
			stampedeSplay, spread, stampede)}}

	dir := filepath.Join(cfg.dir, "stampede")
	srv, err := s3Bucket(ctx, dir, "capped")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	plain, err := s3.New(ctx, s3.Config{Bucket: "capped", Endpoint: srv.Endpoint, PathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		return nil, err
	}
	size := int64(cfg.sizeMiB) << 20
	src := filepath.Join(dir, "object.bin")
	if err := writeRandom(src, size); err != nil {
		return nil, err
	}
	capped := store.Limited(plain, store.NewLimits(stampedeLimit, stampedeLimit))
	put, get := storeOps(ctx, cfg, capped, src, size)
	freePut, freeGet := storeOps(ctx, cfg, plain, src, size)
	allowed := time.Duration(float64(size) / stampedeLimit * float64(time.Second))
	for _, op := range []struct {
		name        string
		capped, raw func() error
	}{{"Put", put, freePut}, {"Get", get, freeGet}} {
		took, free, err := measure(cfg.runs, op.capped, op.raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op.name, err)
		}
		// A cap that lets more through than it says is no cap.
		if took < allowed*95/100 {
			return nil, fmt.Errorf("%s at a cap of %d MiB/s took %s, under the %s the cap allows", op.name, stampedeLimit>>20, took, allowed)
		}
		rows = append(rows, row{Subject: fmt.Sprintf("s3:// capped at %d MiB/s", stampedeLimit>>20), Op: op.name, Bytes: size,
			Ours: took, Reference: "the time the cap allows", Ref: allowed,
			Note: fmt.Sprintf("uncapped: %.0f MiB/s", float64(size)/(1<<20)/free.Seconds())})
	}
	return rows, nil
}
