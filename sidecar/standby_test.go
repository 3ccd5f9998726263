package sidecar_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/validate"
)

// A sidecar with a warm standby keeps it at the store's head while it
// uploads, and leaves it a data dir when it stops.
func TestSidecarKeepsAWarmStandby(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true})
	cli := c.Client(t)
	ctx := context.Background()
	s := newSetup(t)
	dataDir := filepath.Join(t.TempDir(), "standby")
	sc, err := sidecar.New(sidecar.Options{
		Client:     cli,
		Endpoint:   c.Members[0].ClientURL.String(),
		Backups:    sidecar.BackupOptions{Store: s.st, Snapshots: capture.Options{FullSchedule: "@every 1h", DeltaPeriod: 100 * time.Millisecond, RetentionPeriod: capture.Off}},
		WorkDir:    t.TempDir(),
		Standby:    &restore.FollowOptions{Restore: restore.Options{Member: member.Spec{DataDir: dataDir}}, Poll: 100 * time.Millisecond},
		Membership: sidecar.MembershipOptions{Follow: memberFollow},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = sc.Run(rctx) }()
	defer func() { cancel(); <-done }()
	etcdtest.Eventually(t, "uploader", 10*time.Second, sc.Uploader)
	put(t, cli, 100, "/standby/")
	head, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	rev := head.Header.Revision
	etcdtest.Eventually(t, "the standby reaches the member", 30*time.Second, func() bool {
		return gathered(t, sc)["etcdkit_standby_revision"] >= float64(rev)
	})
	cancel()
	<-done
	rep, err := validate.DataDir(ctx, dataDir, validate.Options{Mode: validate.Full})
	if err != nil || rep.Verdict != validate.Valid || rep.Revision < rev {
		t.Fatalf("the standby's data dir: %+v, %v; want valid at %d or later", rep, err, rev)
	}
}
