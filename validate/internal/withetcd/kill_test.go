package withetcd_test

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/validate"
)

// TestMain lets the test binary be the member a test kills: with
// ETCDKIT_KILL_DIR set it runs etcd there and writes until it is killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("ETCDKIT_KILL_DIR"); dir != "" {
		if err := writeUntilKilled(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

func writeUntilKilled(dir string) error {
	peer, client, err := etcdtest.FreeURLs()
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = "killed", dir, "fatal"
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	<-e.Server.ReadyNotify()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		resp, err := cli.Put(context.Background(), fmt.Sprintf("/k/%d", i%500), strconv.Itoa(i))
		if err != nil {
			return err
		}
		fmt.Println(resp.Header.Revision)
	}
}

// A member killed with SIGKILL in the middle of writes leaves a valid data
// dir: what its database lacks is in its WAL.
func TestKilledMidWriteIsValid(t *testing.T) {
	dir := t.TempDir()
	cmd, lines := writer(t, dir)
	var acked int64
	deadline := time.Now().Add(time.Minute)
	for acked < 2000 && lines.Scan() && time.Now().Before(deadline) {
		acked, _ = strconv.ParseInt(lines.Text(), 10, 64)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if acked < 2000 {
		t.Fatalf("the member acknowledged only revision %d", acked)
	}
	r := check(t, dir, validate.Options{Mode: validate.Full}, validate.Valid, "")
	// Every acknowledged write is in the database or waits in the WAL.
	if r.Revision+r.WALEntries < acked {
		t.Fatalf("revision %d + %d WAL entries, but %d was acknowledged", r.Revision, r.WALEntries, acked)
	}
	check(t, dir, validate.Options{BackupRevision: acked}, validate.Valid, "")
	t.Logf("killed at acknowledged revision %d: database at %d, %d WAL entries to apply", acked, r.Revision, r.WALEntries)
}

// A database another process holds (an etcd still running) is Locked,
// not Corrupt.
func TestLockedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, lines := writer(t, dir)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	// The first acknowledged write: the member runs and holds its database.
	if !lines.Scan() {
		t.Fatal("the member wrote nothing")
	}
	check(t, dir, validate.Options{LockTimeout: 200 * time.Millisecond}, validate.Locked, "db")
}

// writer starts this test binary as a member on dir that writes until it
// is killed, printing each acknowledged revision.
func writer(t *testing.T, dir string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ETCDKIT_KILL_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}
