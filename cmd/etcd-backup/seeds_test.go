package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// A control plane that moves between seeds (Gardener's live migration,
// GEP-39), TLS everywhere: three members in the source seed, each with a
// serve sidecar on the source bucket, and three in the target seed, each
// with etcd-backup server on the target bucket, joined to the source by
// etcd-druid's bootstrap with an existing cluster into one cluster of six.
// A writer runs throughout. Only the leader's sidecar uploads: the source
// bucket until the leader moves into the target seed, the target bucket
// from then on, and nothing the source's sidecars wrote is newer than the
// target's first full. The source members are removed one by one; their
// sidecars say so and hold out. Each bucket holds one timeline, and the
// target's backups restore every acknowledged write.
func TestClusterMovesBetweenSeeds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d := newDruid(t, 3)
	d.source = etcdtest.Start(t, etcdtest.Options{Members: 3, TLS: true, Security: d.sec, UnsafeNoFsync: true})
	sourceStore := "file://" + t.TempDir()
	targetStore := "file://" + filepath.Join(d.storeDir, "backups", "etcd-main")
	// Every member's client URL: a sidecar asks the others whether its
	// member, once silent, is still listed.
	all := append(append([]string{}, d.source.Endpoints()...), d.members[0].client, d.members[1].client, d.members[2].client)
	var sourceSidecars []*sidecarProc
	for _, m := range d.source.Members {
		conn := append([]string{"--endpoints", strings.Join(all, ","), "--member-endpoint", m.ClientURL.String()}, connFlags(d.sec, "")...)
		sourceSidecars = append(sourceSidecars, startServe(t, conn, sourceStore, "--delta-period", "500ms"))
	}

	// The writer, one put after another's answer: every put it saw
	// acknowledged must be in the target's backups at the end.
	wcli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: all, TLS: d.sec.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wcli.Close() }()
	w := startWriter(ctx, wcli, "/move/")
	defer w.stop()
	etcdtest.Eventually(t, "the source bucket holds a chain", 30*time.Second, func() bool { return listTimelines(t, sourceStore).newest() > 1 })

	// The target seed joins, one member at a time (etcd admits one
	// learner at a time).
	d.resize(3)
	src := d.source.Client(t)
	for i, m := range d.members {
		d.startServer(m)
		waitServing(t, d, m)
		if err := d.brWrapper(ctx, m, "full"); err != nil {
			t.Fatal(err)
		}
		etcdtest.Eventually(t, m.pod+" is a voter", time.Minute, func() bool {
			list, err := src.MemberList(ctx)
			if err != nil || len(list.Members) != 4+i {
				return false
			}
			for _, lm := range list.Members {
				if lm.IsLearner || lm.Name == "" {
					return false
				}
			}
			return true
		})
	}
	if r := etcdBackup(t, nil, "list", "--store", targetStore); !strings.Contains(r.stderr, "nothing was ever backed up there") {
		t.Fatalf("the target bucket holds backups while the leader is in the source seed:\n%s%s", r.stdout, r.stderr)
	}

	// The leader moves into the target seed.
	leader := d.source.Leader()
	target := uint64(d.members[0].etcd.Server.MemberID())
	if _, err := leader.Client(t).MoveLeader(ctx, target); err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	etcdtest.Eventually(t, "the target bucket holds a chain", time.Minute, func() bool {
		return etcdBackup(t, nil, "list", "--store", targetStore).code == 0 && listTimelines(t, targetStore).newest() > 1
	})
	took := time.Since(moved)
	writtenAt := w.count()
	etcdtest.Eventually(t, "writes go on after the move", 30*time.Second, func() bool { return w.count() > writtenAt+50 })

	// The source members are removed one by one, through the target's.
	mcli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{d.members[0].client, d.members[1].client, d.members[2].client}, TLS: d.sec.TLSFiles()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mcli.Close() }()
	for i, m := range d.source.Members {
		// Stopped first: an in-process etcd asked for its status while it
		// applies its own removal panics (etcd-io/etcd#21966), and these
		// share the test's process.
		id := uint64(m.Etcd().Server.MemberID())
		m.Stop()
		etcdtest.Eventually(t, m.Name+" is removed", time.Minute, func() bool {
			_, err := mcli.MemberRemove(ctx, id)
			return err == nil
		})
		p := sourceSidecars[i]
		etcdtest.Eventually(t, m.Name+"'s sidecar says it was removed", time.Minute, func() bool {
			resp, err := http.Get(p.url + "/readyz")
			if err != nil {
				return false
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "removed on purpose")
		})
	}
	acked := w.stop()
	last := int64(0)
	for _, rev := range acked {
		last = max(last, rev)
	}
	etcdtest.Eventually(t, "the target's chain reaches the last acknowledged write", time.Minute, func() bool { return listTimelines(t, targetStore).newest() >= last })
	for _, p := range sourceSidecars {
		if err := p.term(t); err != nil {
			t.Fatal(err)
		}
	}

	// Each bucket one timeline; nothing in the source's newer than the
	// target's first full.
	srcList, tgtList := listTimelines(t, sourceStore), listTimelines(t, targetStore)
	if len(srcList.Timelines) != 1 || len(tgtList.Timelines) != 1 {
		t.Fatalf("timelines: source %+v, target %+v", srcList.Timelines, tgtList.Timelines)
	}
	st, err := store.Open(ctx, targetStore)
	if err != nil {
		t.Fatal(err)
	}
	sst, err := store.Open(ctx, sourceStore)
	if err != nil {
		t.Fatal(err)
	}
	tcat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	scat, err := snapshot.List(ctx, sst)
	if err != nil {
		t.Fatal(err)
	}
	first := tcat.Fulls()[0].LastRevision
	if end := scat.NewestRevision(); end > first {
		t.Fatalf("the source's sidecars wrote up to revision %d, past the target's first full at %d: two uploaded at once", end, first)
	}
	state, err := history.ReadState(ctx, st, history.StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, kv := range state.KVs {
		have[string(kv.Key)] = true
	}
	for key := range acked {
		if !have[key] {
			t.Fatalf("the target's backups (to revision %d) lack %s, acknowledged at revision %d", state.Revision, key, acked[key])
		}
	}
	resp, err := mcli.MemberList(ctx)
	if err != nil || len(resp.Members) != 3 {
		t.Fatalf("after the cut the cluster lists %v (%v)", resp, err)
	}
	t.Logf("the move: %d acknowledged writes; the source bucket to revision %d, the target's from its first full at %d to %d; "+
		"the target's first full %s after the leader moved; the target's backups restore all of them",
		len(acked), scat.NewestRevision(), first, state.Revision, took.Round(time.Millisecond))
}
