package restore_test

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/validate"
)

// Backups of real etcd 3.5, 3.6 and 3.7 members, over TLS, taken by the
// Snapshotter (a full, then deltas with leases granted after it), restore
// for each release, and the real etcd of that release serves the result:
// every key, its revisions and lease, and the leases with their TTLs, as
// the backed-up member had them, and the next write at the next revision.
// A backup of 3.7 restored for 3.5 is the way back after an upgrade.
func TestRestoresForEachRelease(t *testing.T) {
	for _, kind := range emulator.EtcdKinds {
		t.Run(string(kind), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			dir := t.TempDir()
			ca := pki.NewCA(t, dir, "ca")
			server := ca.Issue(t, "server", pki.LeafOptions{CommonName: "etcd", ServerOnly: true})
			client := ca.Issue(t, "client", pki.LeafOptions{CommonName: "backup", ClientOnly: true})
			old := emulator.RequireEtcd(t, kind, emulator.EtcdOptions{CA: ca.File, Cert: server.CertFile, Key: server.KeyFile,
				ClientCert: client.CertFile, ClientKey: client.KeyFile})
			t.Logf("etcd %s at %s", old.Etcd.Version, old.Etcd.ClientURL)
			cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{old.Etcd.ClientURL},
				TLS: tlsfiles.Files{CA: ca.File, Cert: client.CertFile, Key: client.KeyFile}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cli.Close() }()

			work := etcdtest.Workload{Ops: 300, Seed: 5, TxnPercent: 20, DeletePercent: 15, LeasePercent: 10}
			if _, err := work.Run(ctx, cli); err != nil {
				t.Fatal(err)
			}
			st, err := store.NewFile(filepath.Join(dir, "backups"))
			if err != nil {
				t.Fatal(err)
			}
			results := make(chan capture.Result, 100)
			s, err := capture.New(cli, st, capture.Options{
				FullSchedule: "@every 1h", DeltaPeriod: 50 * time.Millisecond, RetentionPeriod: capture.Off,
				SpoolDir: t.TempDir(), Codec: snapshot.Codec{Compression: snapshot.Gzip},
				OnResult: func(r capture.Result) { results <- r },
			})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- s.Run(runCtx) }()
			for r := range results {
				if r.Err != nil {
					t.Fatalf("%s %s: %v", r.Op, r.Reason, r.Err)
				}
				if r.Op == capture.OpFull {
					break
				}
			}
			// After the full: another lease, and range deletes among the rest.
			work.Seed, work.Prefix = 6, "/after/"
			res, err := work.Run(ctx, cli)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Delete(ctx, "/workload/key-00001", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
			if _, err := s.TakeDelta(ctx); err != nil && !errors.Is(err, capture.ErrNoEvents) {
				t.Fatal(err)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			head := s.Status().LastRevision
			if head <= res.LastRevision {
				t.Fatalf("the backups end at revision %d, the workload wrote up to %d", head, res.LastRevision)
			}
			live := leasesOf(t, cli)

			for _, target := range emulator.EtcdKinds {
				t.Run("for "+string(target), func(t *testing.T) {
					restoreFor(t, ctx, st, target, head, cli, live)
				})
			}
		})
	}
}

// restoreFor restores st's latest chain for the release of the etcd
// server target, starts that server on it and compares it with the live
// member cli reaches at revision head.
func restoreFor(t *testing.T, ctx context.Context, st store.Store, target emulator.Kind, head int64, cli *clientv3.Client, live map[clientv3.LeaseID]int64) {
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	release := etcdversion.MustParse(strings.TrimPrefix(string(target), "etcd-"))
	data := filepath.Join(t.TempDir(), "restored")
	rres, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: data, Name: "restored", PeerURLs: []string{peer.String()}}, Release: release})
	if err != nil {
		t.Fatal(err)
	}
	if rres.Revision != head || len(rres.Chain.Deltas) == 0 || rres.GrantedLeases != 1 {
		t.Fatalf("restored revision %d from %d deltas, %d leases granted again; want %d, some, 1", rres.Revision, len(rres.Chain.Deltas), rres.GrantedLeases, head)
	}
	if r, err := validate.DataDir(ctx, data, validate.Options{Mode: validate.Full, Etcd: release}); err != nil || r.Verdict != validate.Valid {
		t.Fatalf("the data dir restored for etcd %s: %s %q, %v", release, r.Verdict, r.Reason, err)
	}
	m := emulator.RequireEtcd(t, target, emulator.EtcdOptions{DataDir: data, Name: "restored", PeerURL: peer.String()})
	rcli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{m.Etcd.ClientURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rcli.Close() }()
	st2, err := rcli.Status(ctx, m.Etcd.ClientURL)
	if err != nil || st2.Version != m.Etcd.Version {
		t.Fatalf("the restored member answers as etcd %v (%v), want %s", st2, err, m.Etcd.Version)
	}
	compareAt(t, cli, rcli, head, head)
	if got := leasesOf(t, rcli); !maps.Equal(got, live) {
		t.Fatalf("restored leases %v, the backed-up member had %v", got, live)
	}
	put, err := rcli.Put(ctx, "/after/restore", "1")
	if err != nil {
		t.Fatal(err)
	}
	if put.Header.Revision != head+1 {
		t.Fatalf("the restored member writes at revision %d, want %d", put.Header.Revision, head+1)
	}
}
