package sidecar_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/startup"
)

// In the divisions where the sidecar validates (--init=sidecar, and
// etcd-backup-restore's protocol), a member the cluster removed on
// purpose stays out too: /v1/validate says Removed with the reason, and
// the sidecar beside it answers /readyz 503 with it and sets
// etcdkit_member_removed, which a check of a data dir that is no longer
// the removed member's clears.
func TestRemovedMemberStaysOut(t *testing.T) {
	s := newSetup(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true, Dir: s.root})
	gone := c.Members[2]
	r := s.start(t, c, gone)
	base := r.srv.URL
	c.Remove(t, gone)
	gone.Stop()

	var initial []string
	for _, m := range c.Members {
		initial = append(initial, m.Name+"="+m.PeerURL.String())
	}
	var v api.Validation
	body := `{"data_dir": "` + gone.Dir + `", "name": "` + gone.Name + `", "initial_cluster": "` + strings.Join(initial, ",") + `"}`
	if code, _ := call(t, "POST", base+"/v1/validate", token, body, &v); code != http.StatusOK || v.Verdict != "Removed" || !strings.Contains(v.Reason, "members_removed") {
		t.Fatalf("validate the removed member's data dir: %d %+v", code, v)
	}
	var ready api.Readiness
	etcdtest.Eventually(t, "/readyz says the member stays out", 30*time.Second, func() bool {
		code, _ := call(t, "GET", base+"/readyz", "", "", &ready)
		return code == http.StatusServiceUnavailable && strings.Contains(ready.MemberRemoved, "members_removed")
	})
	t.Logf("/readyz: %s", ready.Error)
	if g := gathered(t, r.sc)[startup.MetricMemberRemoved]; g != 1 {
		t.Fatalf("%s = %v after the removed member's check, want 1", startup.MetricMemberRemoved, g)
	}

	// Its data dir moved aside by hand, the member may join again.
	body = `{"data_dir": "` + filepath.Join(s.root, "new") + `", "name": "` + gone.Name + `"}`
	if code, _ := call(t, "POST", base+"/v1/validate", token, body, &v); code != http.StatusOK || v.Verdict != "Empty" {
		t.Fatalf("validate an empty data dir: %d %+v", code, v)
	}
	if g := gathered(t, r.sc)[startup.MetricMemberRemoved]; g != 0 {
		t.Fatalf("%s = %v after an empty data dir's check, want 0", startup.MetricMemberRemoved, g)
	}
}
