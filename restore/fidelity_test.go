package restore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// seeds are the randomized histories the fidelity test restores: five
// that cover every variant a seed picks besides its workload (0 scheduled,
// 1 moving with a bump, 2 secure, 4 none, 9 scheduled and moving with a
// bump), or the first two hundred with ETCDKIT_LONG=1.
func seeds() []uint64 {
	if os.Getenv("ETCDKIT_LONG") == "1" {
		var all []uint64
		for seed := range uint64(200) {
			all = append(all, seed)
		}
		return all
	}
	return []uint64{0, 1, 2, 4, 9}
}

// scheduled is whether a seed's second full comes from the cron schedule
// (hourly, on a clock that starts a second before the hour: it fires amid
// the workload) instead of a demand midway.
func scheduled(seed uint64) bool { return seed%3 == 0 && !secure(seed) }

// moving is whether a seed's cluster has three members and its leader
// moves twice during the workload: the Snapshotter's watch ends with the
// leader and must go on from where it was.
func moving(seed uint64) bool { return seed%4 == 1 }

// recorded is what a randomized workload did to a live member whose
// backups a Snapshotter took meanwhile.
type recorded struct {
	cli       *clientv3.Client
	st        store.Store
	fulls     []snapshot.Snapshot
	compacted int64 // the last live compaction
	head      int64
	// leases are the live member's leases at the head, by ID, with their
	// granted TTLs; kept is a short one a keep-alive held until then.
	leases map[clientv3.LeaseID]int64
	kept   clientv3.LeaseID
	// sec is the cluster's TLS and users, nil for a plain one; auth its
	// users and roles at the head, made and changed between the fulls.
	sec  *etcdtest.Security
	auth authState
}

// secure is whether a seed's cluster runs with TLS and authentication,
// and changes its users and roles during the workload: each change brings
// a full snapshot of its own.
func secure(seed uint64) bool { return seed%5 == 2 }

// record runs a randomized workload while a Snapshotter backs the member
// up: puts of values up to 1 MiB, deletes, range deletes, multi-op txns,
// keys with long leases (granted before and after the first full), with
// leases that expire, with a short lease a keep-alive holds, a second full
// snapshot midway and live compactions; on secure seeds, users and roles
// made and changed before and after the second full; on moving seeds, a
// three-member cluster whose leader moves twice.
func record(t *testing.T, seed uint64, ops int) recorded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	members := 1
	if moving(seed) {
		members = 3
	}
	c := etcdtest.Start(t, etcdtest.Options{Members: members, TLS: secure(seed), Auth: secure(seed), UnsafeNoFsync: moving(seed)})
	cli := c.Client(t)
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	key := func() string { return fmt.Sprintf("/p%d/k%03d", r.IntN(8), r.IntN(60)) }
	small := func() string { return strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(300)) }
	value := func() string {
		if r.IntN(200) == 0 {
			return strings.Repeat("M", 1<<20) // the largest value a default member takes
		}
		return small()
	}
	early, err := cli.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/leased/early", "x", clientv3.WithLease(early.ID)); err != nil {
		t.Fatal(err)
	}

	results := make(chan capture.Result, 1000)
	clock := &etcdtest.Clock{}
	clock.Set(time.Date(2026, 12, 1, 10, 20, 0, 0, time.UTC))
	if scheduled(seed) {
		clock.Set(time.Date(2026, 12, 1, 10, 59, 59, 0, time.UTC))
	}
	s, err := capture.New(cli, st, capture.Options{
		FullSchedule: "0 * * * *", Now: clock.Now, DeltaPeriod: 50 * time.Millisecond, DeltaMemoryLimit: 256 << 10,
		RetentionPeriod: capture.Off, SpoolDir: t.TempDir(), MinBackoff: 20 * time.Millisecond,
		Codec:    snapshot.Codec{Compression: snapshot.Zstd},
		OnResult: func(res capture.Result) { results <- res },
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	h := recorded{cli: cli, st: st, sec: c.Security}
	for res := range results {
		if res.Op == capture.OpFull && res.Err == nil {
			h.fulls = append(h.fulls, res.Snapshot)
			break
		}
	}

	late, err := cli.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	longs := []clientv3.LeaseID{early.ID, late.ID}
	// lastAuth is the revision of the last change of users and roles.
	var lastAuth int64
	keepCtx, stopKeeping := context.WithCancel(ctx)
	defer stopKeeping()
	var short clientv3.LeaseID
	for i := range ops {
		var err error
		switch p := r.IntN(100); {
		case p < 45:
			_, err = cli.Put(ctx, key(), value())
		case p < 55:
			_, err = cli.Delete(ctx, key())
		case p < 58:
			_, err = cli.Delete(ctx, fmt.Sprintf("/p%d/", r.IntN(8)), clientv3.WithPrefix())
		case p < 75:
			seen := map[string]bool{}
			var txn []clientv3.Op
			for range 2 + r.IntN(4) {
				k := key()
				if seen[k] {
					continue
				}
				seen[k] = true
				if r.IntN(4) == 0 {
					txn = append(txn, clientv3.OpDelete(k))
				} else {
					// Small values: two large ones pass the request limit.
					txn = append(txn, clientv3.OpPut(k, small()))
				}
			}
			_, err = cli.Txn(ctx).Then(txn...).Commit()
		case p < 85:
			lease := longs[r.IntN(len(longs))]
			_, err = cli.Put(ctx, key(), value(), clientv3.WithLease(lease))
		default:
			if short == 0 {
				g, gerr := cli.Grant(ctx, 1)
				if gerr != nil {
					t.Fatal(gerr)
				}
				short = g.ID
			}
			_, err = cli.Put(ctx, "/short/"+key(), "expires", clientv3.WithLease(short))
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				short, err = 0, nil // it expired: the next one grants another
			}
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		switch {
		case secure(seed) && i == ops/4:
			changeAuth(t, cli, false)
		case secure(seed) && i == 3*ops/4:
			changeAuth(t, cli, true)
			resp, err := cli.Get(ctx, "/", clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			lastAuth = resp.Header.Revision
		case moving(seed) && (i == ops/5 || i == 2*ops/3):
			c.MoveLeader(t)
		}
		switch i {
		case ops / 3:
			resp, err := cli.Get(ctx, "/")
			if err != nil {
				t.Fatal(err)
			}
			h.compacted = resp.Header.Revision - 20
			// Compaction stays behind the backups, as it must in any
			// deployment: history compacted before it was captured is
			// in no chain, and the Snapshotter answers with a full.
			for s.Status().LastRevision < h.compacted {
				if ctx.Err() != nil {
					t.Fatal("the snapshotter did not reach the compaction revision")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := cli.Compact(ctx, h.compacted); err != nil {
				t.Fatal(err)
			}
		case ops / 2:
			var full snapshot.Snapshot
			if scheduled(seed) {
				for full = s.Status().LastFull; full.Key == h.fulls[0].Key; full = s.Status().LastFull {
					if ctx.Err() != nil {
						t.Fatal("no full snapshot at 11:00")
					}
					time.Sleep(10 * time.Millisecond)
				}
				t.Logf("the schedule's full at %s, revision %d", full.Created.Format(time.TimeOnly), full.LastRevision)
			} else if full, err = s.TakeFull(ctx); err != nil {
				t.Fatal(err)
			}
			h.fulls = append(h.fulls, full)
			// Leases the latest chain's full does not hold: a long one
			// and a short one a keep-alive holds to the end.
			last, err := cli.Grant(ctx, 3600)
			if err != nil {
				t.Fatal(err)
			}
			kept, err := cli.Grant(ctx, keptTTL)
			if err != nil {
				t.Fatal(err)
			}
			alive, err := cli.KeepAlive(keepCtx, kept.ID)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for range alive {
				}
			}()
			h.kept = kept.ID
			longs = append(longs, last.ID, kept.ID)
		}
	}
	if _, err := cli.Put(ctx, "/kept/last", "x", clientv3.WithLease(h.kept)); err != nil {
		t.Fatal(err)
	}
	// The short lease expires: its keys are deleted by the member.
	deadline := time.Now().Add(10 * time.Second)
	for short != 0 {
		resp, err := cli.Get(ctx, "/short/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the short lease did not expire")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The snapshotter takes a full after the delta that saw a change of
	// users and roles: on a loaded machine the last change's may not have
	// come yet.
	if lastAuth > 0 {
		// A write after the change makes a delta past it, which the full
		// follows; the snapshotter's results say when it is written.
		if _, err := cli.Put(ctx, "/nudge", "x"); err != nil {
			t.Fatal(err)
		}
		for full := false; !full; {
			select {
			case res := <-results:
				full = res.Op == capture.OpFull && res.Err == nil && res.Snapshot.LastRevision >= lastAuth
			case <-ctx.Done():
				t.Fatal("no full snapshot after the last change of users and roles")
			}
		}
	}
	last, err := s.TakeDelta(ctx)
	if err != nil && !errors.Is(err, capture.ErrNoEvents) {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.leases = leasesOf(t, cli)
	h.auth = authOf(t, cli)
	stopKeeping()
	h.head = s.Status().LastRevision
	if last.LastRevision != 0 && last.LastRevision != h.head {
		t.Fatalf("last delta ends at %d, status says %d", last.LastRevision, h.head)
	}
	return h
}

// keptTTL is the TTL in seconds of the lease a keep-alive holds until
// the restore: short enough that the test sees it expire on the restored
// member, long enough that the test reads it there first, even on a
// loaded machine.
const keptTTL = 10

// TestFidelity restores randomized histories at their head and at random
// revisions and compares every key with the live member at that revision.
func TestFidelity(t *testing.T) {
	for _, seed := range seeds() {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			h := record(t, seed, 600)
			ctx := context.Background()
			codec := snapshot.Codec{}

			// The head: a data dir that a member starts from, serving every
			// key as the live member had it, and taking writes after it.
			peer, _, err := etcdtest.FreeURLs()
			if err != nil {
				t.Fatal(err)
			}
			if h.sec != nil && h.sec.CA != nil {
				peer.Scheme = "https"
			}
			dir := filepath.Join(t.TempDir(), "data")
			bump := uint64(0)
			if seed%2 == 1 {
				bump = 1000
			}
			res, err := restore.Restore(ctx, h.st, restore.Options{Read: restore.ReadOptions{Codec: codec}, Member: member.Spec{DataDir: dir, Name: "restored", PeerURLs: []string{peer.String()}}, RevisionBump: bump})
			if err != nil {
				t.Fatal(err)
			}
			if res.Revision != h.head {
				t.Fatalf("restored revision %d, head %d", res.Revision, h.head)
			}
			// last and kept at least, granted after the second full; none
			// without the TTL its delta recorded. A secure seed's latest
			// full, after its last change of users, holds them.
			if !secure(seed) && res.GrantedLeases < 2 || res.GuessedLeases != 0 || res.DroppedLeases != 0 {
				t.Fatalf("leases granted again %d, with a guessed TTL %d, dropped %d", res.GrantedLeases, res.GuessedLeases, res.DroppedLeases)
			}
			m := etcdtest.StartDataDir(t, etcdtest.Options{Security: h.sec}, "restored", dir, peer)
			rcli := m.Client(t)
			// The same leases, with the same TTLs: the short ones that
			// expired are not granted again. Read first: the kept lease
			// expires on the restored member keptTTL after it starts, and
			// the comparisons below took longer than that on a loaded
			// machine.
			if got := leasesOf(t, rcli); !maps.Equal(got, h.leases) {
				t.Fatalf("restored leases (ID: granted TTL) %v, live %v", got, h.leases)
			}
			if n := keysWithLease(t, rcli, h.kept); n == 0 {
				t.Fatal("no key has the kept lease on the restored member")
			}
			if secure(seed) {
				checkAuth(t, h, m, res)
			} else if res.AuthRestored {
				t.Fatal("users and roles restored from a cluster that never changed them")
			}
			// A bumped restore marks its head compacted: it is read as the latest.
			readAt := h.head
			if bump > 0 {
				readAt = 0
			}
			compareAt(t, h.cli, rcli, h.head, readAt)
			put, err := rcli.Put(ctx, "/after/restore", "1")
			if err != nil {
				t.Fatal(err)
			}
			// The first write follows the restored head, past only the
			// deletions of the kept lease's keys when it expired first (a
			// loaded machine takes keptTTL to get here).
			if want := h.head + int64(bump) + 1; put.Header.Revision != want {
				if put.Header.Revision < want {
					t.Fatalf("first write after restore at revision %d, want %d", put.Header.Revision, want)
				}
				wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
				done := false
				for wr := range rcli.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(want)) {
					for _, ev := range wr.Events {
						if ev.Kv.ModRevision == put.Header.Revision {
							done = true
							break
						}
						if ev.Type != clientv3.EventTypeDelete {
							t.Fatalf("first write after restore at revision %d, want %d; revision %d put %q", put.Header.Revision, want, ev.Kv.ModRevision, ev.Kv.Key)
						}
					}
					if done || wr.Err() != nil {
						break
					}
				}
				wcancel()
				if !done {
					t.Fatalf("first write after restore at revision %d, want %d; the revisions between could not be read", put.Header.Revision, want)
				}
			}
			// Random revisions after the live compaction: the replay digest
			// equals the live one.
			r := rand.New(rand.NewPCG(seed, 11))
			from := max(h.compacted, h.fulls[0].LastRevision)
			for range 3 {
				rev := from + r.Int64N(h.head-from+1)
				rep, err := history.Verify(ctx, h.st, history.VerifyOptions{Read: restore.ReadOptions{Target: restore.Target{Revision: rev}}})
				if err != nil {
					cat, _ := snapshot.List(ctx, h.st)
					for _, s := range cat.Snapshots {
						t.Log(s.Key)
					}
					t.Fatalf("verify at %d: %v", rev, err)
				}
				live, err := history.LiveDigest(ctx, h.cli, rev)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Digest != live {
					t.Fatalf("revision %d: backup %+v, live %+v", rev, rep.Digest, live)
				}
			}
			// Nothing keeps the kept lease alive on the restored member:
			// its keys go once its TTL (keptTTL) passes there. A TTL of -1
			// is not the event: an expired lease reads -1 until the
			// leader's revoke is applied, and the revoke drops the lease
			// from the member's list before its delete of the keys
			// commits, so the wait is for both.
			etcdtest.Eventually(t, "the kept lease and its keys are gone from the restored member", 30*time.Second, func() bool {
				_, listed := leasesOf(t, rcli)[h.kept]
				return !listed && keysWithLease(t, rcli, h.kept) == 0
			})
		})
	}
}

// leasesOf is a member's leases by ID, with their granted TTLs.
func leasesOf(t *testing.T, cli *clientv3.Client) map[clientv3.LeaseID]int64 {
	t.Helper()
	ctx := context.Background()
	resp, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[clientv3.LeaseID]int64{}
	for _, l := range resp.Leases {
		ttl, err := cli.TimeToLive(ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[l.ID] = ttl.GrantedTTL
	}
	return out
}

func keysWithLease(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) int {
	t.Helper()
	resp, err := cli.Get(context.Background(), "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, kv := range resp.Kvs {
		if clientv3.LeaseID(kv.Lease) == id {
			n++
		}
	}
	return n
}

// compareAt compares every key of the live member at rev with the restored
// one at restoredRev: value, create revision, modification revision,
// version and lease.
func compareAt(t *testing.T, live, restored *clientv3.Client, rev, restoredRev int64) {
	t.Helper()
	ctx := context.Background()
	want, err := live.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	got, err := restored.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(restoredRev))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != len(want.Kvs) {
		t.Fatalf("revision %d: %d keys restored, %d live", rev, len(got.Kvs), len(want.Kvs))
	}
	for i, w := range want.Kvs {
		g := got.Kvs[i]
		if string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value) || g.CreateRevision != w.CreateRevision ||
			g.ModRevision != w.ModRevision || g.Version != w.Version || g.Lease != w.Lease {
			t.Fatalf("revision %d, key %q: restored %d/%d/v%d/lease %x, live %d/%d/v%d/lease %x (create/mod/version/lease)",
				rev, w.Key, g.CreateRevision, g.ModRevision, g.Version, g.Lease, w.CreateRevision, w.ModRevision, w.Version, w.Lease)
		}
	}
}

// changeAuth changes users and roles: before the second full, a user with
// a password and two roles; after it, another user, a role's permissions,
// a role deleted, a grant revoked and a password changed.
func changeAuth(t *testing.T, cli *clientv3.Client, afterFull bool) {
	t.Helper()
	ctx := context.Background()
	var err error
	if !afterFull {
		_, err = cli.RoleAdd(ctx, "team")
		err = errors.Join(err, func() error {
			_, err := cli.RoleGrantPermission(ctx, "team", "/p1/", clientv3.GetPrefixRangeEnd("/p1/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}())
		_, e := cli.RoleAdd(ctx, "doomed")
		err = errors.Join(err, e)
		_, e = cli.UserAdd(ctx, "alice", "alice-first")
		err = errors.Join(err, e)
		_, e = cli.UserGrantRole(ctx, "alice", "team")
		err = errors.Join(err, e)
		_, e = cli.UserGrantRole(ctx, "alice", "doomed")
		err = errors.Join(err, e)
	} else {
		_, err = cli.UserAdd(ctx, "bob", "bob-pw")
		_, e := cli.UserGrantRole(ctx, "bob", "team")
		err = errors.Join(err, e)
		_, e = cli.RoleGrantPermission(ctx, "team", "/p2/k001", "", clientv3.PermissionType(clientv3.PermRead))
		err = errors.Join(err, e)
		_, e = cli.RoleDelete(ctx, "doomed")
		err = errors.Join(err, e)
		_, e = cli.UserRevokeRole(ctx, "reader", "reader")
		err = errors.Join(err, e)
		_, e = cli.UserChangePassword(ctx, "alice", "alice-second")
		err = errors.Join(err, e)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// authState is a member's users with their roles and its roles with their
// permissions, as text that compares.
type authState struct {
	Enabled bool
	Users   map[string]string
	Roles   map[string]string
}

func authOf(t *testing.T, cli *clientv3.Client) authState {
	t.Helper()
	ctx := context.Background()
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := authState{Enabled: st.Enabled, Users: map[string]string{}, Roles: map[string]string{}}
	users, err := cli.UserList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users.Users {
		got, err := cli.UserGet(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		a.Users[u] = strings.Join(got.Roles, ",")
	}
	roles, err := cli.RoleList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roles.Roles {
		got, err := cli.RoleGet(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		var perms []string
		for _, p := range got.Perm {
			perms = append(perms, fmt.Sprintf("%s %q-%q", p.PermType, p.Key, p.RangeEnd))
		}
		a.Roles[r] = strings.Join(perms, "; ")
	}
	return a
}

// canLogIn says whether user logs in to the member with password.
func canLogIn(t *testing.T, m *etcdtest.Cluster, user, password string) bool {
	t.Helper()
	cfg := m.ClientConfig()
	cfg.User, cfg.PasswordFile = user, filepath.Join(t.TempDir(), user+".password")
	if err := os.WriteFile(cfg.PasswordFile, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := etcdclient.New(ctx, cfg)
	if err != nil {
		return false
	}
	defer func() { _ = cli.Close() }()
	_, err = cli.Get(ctx, "/p1/k000")
	return err == nil
}

// checkAuth checks a secure seed's users and roles. The head's restore
// comes from the full that followed the last change: every user logs in
// with its current password. The chain of the second full has the change
// after it in a delta: the users and roles come back from there, the
// password a user had at that full, none for a user made after it.
func checkAuth(t *testing.T, h recorded, head *etcdtest.Cluster, res restore.Result) {
	t.Helper()
	ctx := context.Background()
	if got := authOf(t, head.Client(t)); !reflect.DeepEqual(got, h.auth) {
		t.Fatalf("restored users and roles %+v, live %+v", got, h.auth)
	}
	if res.AuthRestored || len(res.UsersWithoutPassword) > 0 || !canLogIn(t, head, "alice", "alice-second") || !canLogIn(t, head, "bob", "bob-pw") {
		t.Fatalf("the head, after a full that followed the last change: auth from deltas %v, users without a password %v, or a password that does not log in",
			res.AuthRestored, res.UsersWithoutPassword)
	}
	cat, err := snapshot.List(ctx, h.st)
	if err != nil {
		t.Fatal(err)
	}
	var chain *snapshot.Chain
	for _, c := range cat.Chains() {
		if c.Full.Key == h.fulls[1].Key {
			chain = &c
		}
	}
	if chain == nil || len(cat.Fulls()) < 4 {
		t.Fatalf("%d fulls, the second one's chain found: %v; want a full after each of the two changes too", len(cat.Fulls()), chain != nil)
	}
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	dir := filepath.Join(t.TempDir(), "data")
	older, err := restore.Restore(ctx, h.st, restore.Options{Read: restore.ReadOptions{Chain: chain}, Member: member.Spec{DataDir: dir, Name: "older", PeerURLs: []string{peer.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	if !older.AuthRestored || !slices.Equal(older.UsersWithoutPassword, []string{"bob"}) || older.GrantedLeases < 2 {
		t.Fatalf("the second full's chain: auth restored %v, users without a password %v, leases granted again %d; want true, [bob], 2 or more",
			older.AuthRestored, older.UsersWithoutPassword, older.GrantedLeases)
	}
	m := etcdtest.StartDataDir(t, etcdtest.Options{Security: h.sec}, "older", dir, peer)
	if got := authOf(t, m.Client(t)); !reflect.DeepEqual(got, h.auth) {
		t.Fatalf("users and roles from the deltas %+v, live %+v", got, h.auth)
	}
	if !canLogIn(t, m, "alice", "alice-first") || canLogIn(t, m, "alice", "alice-second") || canLogIn(t, m, "bob", "bob-pw") {
		t.Fatal("from the deltas: alice logs in with another password than the second full's, or bob with one")
	}
}
