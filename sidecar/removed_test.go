package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/member"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/startup"
)

// In the divisions where the sidecar runs the start-up (--init=sidecar,
// and etcd-backup-restore's protocol for etcd-druid), a member the
// cluster removed on purpose while it was down, whose data dir cannot
// know it, stays out too: the start-up refuses and holds, adding nothing,
// and the sidecar beside it answers /readyz 503 with the reason and sets
// etcdkit_member_removed, which a check of another data dir clears.
// Before any start-up check, the sidecar already names the removal of the
// member it saw run: the cluster no longer lists it. (The member is
// stopped before it is removed: an in-process etcd asked for its status
// while it applies its own removal panics, etcd-io/etcd#21966.)
func TestRemovedMemberStaysOut(t *testing.T) {
	s := newSetup(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true, Dir: s.root})
	gone := c.Members[2]
	r := s.start(t, c, gone)
	base := r.srv.URL
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var ready api.Readiness
	etcdtest.Eventually(t, "the sidecar sees its member", 30*time.Second, func() bool {
		code, _ := call(t, "GET", base+"/readyz", "", "", &ready)
		return code == http.StatusOK && ready.MemberID != "0"
	})
	cli := c.Members[0].Client(t)
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	var initial []string
	for _, m := range list.Members {
		if m.Name == gone.Name {
			id = m.ID
		}
		initial = append(initial, m.Name+"="+m.PeerURLs[0])
	}
	gone.Stop()
	// Down, and still listed: a member that does not answer, no more.
	etcdtest.Eventually(t, "/readyz says the member does not answer", 30*time.Second, func() bool {
		code, _ := call(t, "GET", base+"/readyz", "", "", &ready)
		return code == http.StatusServiceUnavailable && ready.Error != ""
	})
	if ready.MemberRemoved != "" || gathered(t, r.sc)[startup.MetricMemberRemoved] != 0 {
		t.Fatalf("a member that is only down is named removed: %+v", ready)
	}
	etcdtest.Eventually(t, "the stopped member is removed", 30*time.Second, func() bool {
		_, err := cli.MemberRemove(ctx, id)
		return err == nil
	})
	etcdtest.Eventually(t, "/readyz names the removal", time.Minute, func() bool {
		code, _ := call(t, "GET", base+"/readyz", "", "", &ready)
		return code == http.StatusServiceUnavailable && strings.Contains(ready.MemberRemoved, fmt.Sprintf("no longer lists member %x", id))
	})
	t.Logf("/readyz: %s", ready.Error)
	if g := gathered(t, r.sc)[startup.MetricMemberRemoved]; g != 1 {
		t.Fatalf("%s = %v after the removal, want 1", startup.MetricMemberRemoved, g)
	}

	// Its data is sound: the verdict is about the data dir.
	var v api.Validation
	body := `{"data_dir": "` + gone.Dir + `", "name": "` + gone.Name + `", "initial_cluster": "` + strings.Join(initial, ",") + `"}`
	if code, _ := call(t, "POST", base+"/v1/validate", token, body, &v); code != http.StatusOK || v.Verdict != "Valid" {
		t.Fatalf("validate the removed member's data dir: %d %+v", code, v)
	}
	// The start-up, as etcd-backup-restore's protocol runs it in the
	// sidecar, refuses and holds: the cluster does not list the member its
	// data is of, and etcdkit removes no member before it moved its data
	// dir aside.
	cfg := startup.Config{Member: member.Spec{Name: gone.Name, DataDir: gone.Dir, PeerURLs: []string{gone.PeerURL.String()}, InitialCluster: strings.Join(initial, ","), Token: "etcdtest"}, ClientURLs: []string{gone.ClientURL.String()}, Endpoints: []string{c.Members[0].ClientURL.String(), c.Members[1].ClientURL.String()}}
	_, err = r.sc.Prepare(ctx, cfg, startup.Options{})
	if r := (*startup.Refusal)(nil); !errors.As(err, &r) || !r.Plan.Hold || !strings.Contains(r.Plan.Reason, "removed it on purpose") {
		t.Fatalf("the start-up of the removed member: %v", err)
	}
	if list, err := cli.MemberList(ctx); err != nil || len(list.Members) != 2 {
		t.Fatalf("after the refusal the members are %v, %v", list, err)
	}
	// The start-up's reason replaces the sidecar's own.
	etcdtest.Eventually(t, "/readyz says the member stays out", 30*time.Second, func() bool {
		code, _ := call(t, "GET", base+"/readyz", "", "", &ready)
		return code == http.StatusServiceUnavailable && strings.Contains(ready.MemberRemoved, "removed it on purpose")
	})
	t.Logf("/readyz: %s", ready.Error)
	if g := gathered(t, r.sc)[startup.MetricMemberRemoved]; g != 1 {
		t.Fatalf("%s = %v after the removed member's start-up, want 1", startup.MetricMemberRemoved, g)
	}

	// Another data dir's check (the member's moved aside by hand) clears it.
	body = `{"data_dir": "` + filepath.Join(s.root, "new") + `", "name": "` + gone.Name + `"}`
	if code, _ := call(t, "POST", base+"/v1/validate", token, body, &v); code != http.StatusOK || v.Verdict != "Empty" {
		t.Fatalf("validate an empty data dir: %d %+v", code, v)
	}
	if g := gathered(t, r.sc)[startup.MetricMemberRemoved]; g != 0 {
		t.Fatalf("%s = %v after an empty data dir's check, want 0", startup.MetricMemberRemoved, g)
	}
}
