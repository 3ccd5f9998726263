package capture

import (
	"context"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
)

// A backup user without the root role cannot read users and roles: it is
// refused once per auth revision, not with every delta, and its records
// start once root is granted to it.
func TestAuthRecordsNeedRoot(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := c.ClientConfig()
	cfg.User, cfg.PasswordFile = "reader", c.Security.PasswordFile("reader")
	reader, err := etcdclient.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Close() }()
	var a authLog
	if _, err := a.changed(ctx, reader); !a.deniedOnce(err) {
		t.Fatalf("the first refusal is not reported once: %v", err)
	}
	for range 2 {
		if state, err := a.changed(ctx, reader); state != nil || err != nil {
			t.Fatalf("asked again at the same auth revision: %v %v", state, err)
		}
	}
	if _, err := c.Client(t).UserGrantRole(ctx, "reader", "root"); err != nil {
		t.Fatal(err)
	}
	state, err := a.changed(ctx, reader)
	if err != nil || state == nil || !state.Enabled || len(state.Users) != len(etcdtest.Users) {
		t.Fatalf("after root was granted: %+v %v", state, err)
	}
	if a.deniedOnce(err) || a.takeMoved() {
		t.Fatal("a first record counts as a change")
	}
}
