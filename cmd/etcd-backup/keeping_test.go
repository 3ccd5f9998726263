package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/fleet"
	"github.com/etcdkit/etcdkit/view"
)

// Pins and deletes as an operator runs them, beside a serve whose second
// site keeps less than the first: a pinned chain is kept on both sites
// and shown by list, fleet and the metrics; delete refuses the newest
// and the pinned chain, asks for --yes where no terminal is, and counts
// in serve's metrics once done.
func TestPinsAndDeletes(t *testing.T) {
	c, conn := secureMember(t)
	cli := c.Client(t)
	dir := t.TempDir()
	first, second := "file://"+filepath.Join(dir, "first"), "file://"+filepath.Join(dir, "second")
	p := startServe(t, conn, first, "--gc-period", "300ms", "--retention-policy", "limit-based", "--max-fulls", "5",
		"--secondary-store", second, "--secondary-retention", "limit-based:max-fulls=1,delta-retention=1s")
	full := func() string {
		t.Helper()
		writes(t, cli, 5, "k")
		var a answer
		etcdtest.Eventually(t, "a full on demand", 30*time.Second, func() bool {
			a = apiCall(t, p, "POST", "/v1/snapshots/full", "")
			return a.code == 200
		})
		var v struct{ Key string }
		if err := json.Unmarshal([]byte(a.body), &v); err != nil || v.Key == "" {
			t.Fatalf("full: %s %v", a.body, err)
		}
		writes(t, cli, 5, "k") // a delta after it
		return v.Key
	}
	fulls := []string{full(), full(), full()}
	ok(t, nil, "pin", "--store", first, fulls[1], "--label", "before-upgrade")
	fulls = append(fulls, full())

	fullsOn := func(url string) []string {
		var l listResult
		if err := json.Unmarshal([]byte(ok(t, nil, "list", "--store", url, "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range l.Chains {
			out = append(out, c.Full.Key)
		}
		return out
	}
	etcdtest.Eventually(t, "the second site keeps the pinned chain and the newest", time.Minute, func() bool {
		return slices.Equal(fullsOn(second), []string{fulls[1], fulls[3]})
	})
	// The first site keeps these four and serve's first, unless the first
	// demand came while serve's first full streamed and was answered with
	// it.
	held := fullsOn(first)
	if !slices.Equal(held, fulls) && (len(held) != 5 || !slices.Equal(held[1:], fulls)) {
		t.Fatalf("the first site holds %v, want serve's first and %v", held, fulls)
	}
	var l listResult
	if err := json.Unmarshal([]byte(ok(t, nil, "list", "--store", first, "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	pinned := slices.IndexFunc(l.Chains, func(c view.Chain) bool { return c.Full.Key == fulls[1] })
	if pin := l.Chains[pinned].Pin; pin == nil || pin.Label != "before-upgrade" || !strings.Contains(pin.By, "@") {
		t.Fatalf("list shows the pinned chain's pin as %+v", pin)
	}
	var f fleet.Fleet
	if err := json.Unmarshal([]byte(ok(t, nil, "fleet", "--store", "file://"+dir, "-o", "json")), &f); err != nil {
		t.Fatal(err)
	}
	// The pins are the first site's records; the second site's
	// retention reads them there.
	for _, c := range f.Clusters {
		if (c.Prefix == "first") != (len(c.Pins) == 1 && c.Pins[0].Snapshot == fulls[1]) {
			t.Fatalf("fleet shows %s's pins as %+v", c.Prefix, c.Pins)
		}
	}
	etcdtest.Eventually(t, "serve's metrics show the pinned backup", 30*time.Second, func() bool {
		return strings.Contains(apiCall(t, p, "GET", "/metrics", "").body, `etcdkit_backup_info{full="`+fulls[1]+`",kept_by="limit-based (newest 5), pinned: before-upgrade",pin="before-upgrade",timeline="first"} 1`)
	})

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{fulls[3]}, 1, "the newest chain is the one a restore uses"},
		{[]string{fulls[1]}, 1, `the chain is pinned ("before-upgrade"); etcd-backup unpin it first`},
		{[]string{"--before", "2100-01-01"}, 2, "no terminal to ask on; look with --dry-run, then give --yes"},
	} {
		r := etcdBackup(t, nil, append([]string{"delete", "--store", first}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
			t.Fatalf("delete %v: exit %d, want %d saying %q:\n%s", tc.args, r.code, tc.code, tc.says, r.stderr)
		}
	}
	if got := fullsOn(first); !slices.Equal(got, held) {
		t.Fatalf("refused deletes left %v", got)
	}
	dry := ok(t, nil, "delete", "--store", first, "--before", "2100-01-01", "--dry-run")
	r := etcdBackup(t, nil, "delete", "--store", first, "--before", "2100-01-01", "--yes")
	t.Logf("delete --before --dry-run:\n%s\ndelete --before --yes:\n%s%s", dry, r.stdout, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout, "spared") || !strings.Contains(r.stderr, "snapshot deleted by an operator") {
		t.Fatalf("delete --before --yes: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := fullsOn(first); !slices.Equal(got, []string{fulls[1], fulls[3]}) {
		t.Fatalf("after delete --before the first site holds %v", got)
	}
	etcdtest.Eventually(t, "serve counts the deletion", 30*time.Second, func() bool {
		return strings.Contains(apiCall(t, p, "GET", "/metrics", "").body, "etcdkit_operator_deletions 1\n")
	})
	if err := p.term(t); err != nil {
		t.Fatal(err)
	}
}
