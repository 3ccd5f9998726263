package demo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/wrapper"
)

// Member is a single-member etcd configuration in dir on free loopback
// ports, as etcd's configuration file would give it.
func Member(dir, name string) (*embed.Config, error) {
	peer, client, err := etcdtest.FreeURLs()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, filepath.Join(dir, name)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = name + "=" + peer.String()
	cfg.InitialClusterToken = "demo"
	// etcd logs its own stops as errors; the examples tell their story.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	return cfg, nil
}

// Running is etcd run the way etcd-wrapper runs it, until Stop.
type Running struct {
	cancel context.CancelFunc
	done   chan error
}

// Start runs wrapper.Run with a copy of o.Config (Run adjusts the
// configuration it is given) and waits until etcd serves.
func Start(o wrapper.Options) (*Running, error) {
	cfg := *o.Config
	o.Config = &cfg
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	o.OnReady = func(wrapper.Etcd) { close(ready) }
	go func() { r.done <- wrapper.Run(ctx, o) }()
	select {
	case <-ready:
		return r, nil
	case err := <-r.done:
		cancel()
		return nil, fmt.Errorf("member: %w", err)
	case <-time.After(60 * time.Second):
		cancel()
		return nil, errors.New("member: not ready after 60s")
	}
}

// Stop stops etcd as SIGTERM stops the wrapper.
func (r *Running) Stop() error {
	r.cancel()
	return <-r.done
}

// Client is a client of one endpoint, made before its member may run, as
// a sidecar's is.
func Client(endpoint string) (*clientv3.Client, error) {
	return etcdclient.New(context.Background(), etcdclient.Config{Endpoints: []string{endpoint}, AllowUnreachable: true})
}

// Write puts n keys under /demo/<batch>/ in transactions of 50 and adds
// them to written.
func Write(ctx context.Context, cli *clientv3.Client, written map[string]string, batch string, n int) error {
	for i := 0; i < n; i += 50 {
		var ops []clientv3.Op
		for j := i; j < min(n, i+50); j++ {
			k, v := fmt.Sprintf("/demo/%s/%05d", batch, j), fmt.Sprintf("value %d of %s", j, batch)
			ops = append(ops, clientv3.OpPut(k, v))
			written[k] = v
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Check reads /demo/ back and fails unless it is exactly written.
func Check(ctx context.Context, cli *clientv3.Client, written map[string]string) (int64, error) {
	resp, err := cli.Get(ctx, "/demo/", clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	missing := len(written)
	for _, kv := range resp.Kvs {
		if written[string(kv.Key)] == string(kv.Value) {
			missing--
		}
	}
	if missing != 0 || int(resp.Count) != len(written) {
		return 0, fmt.Errorf("%d of %d keys did not come back (%d read)", missing, len(written), resp.Count)
	}
	return resp.Header.Revision, nil
}

// Damage cuts the member's database well below the pages in use: what a
// full disk or a bad copy leaves.
func Damage(dataDir string) error {
	return os.Truncate(filepath.Join(dataDir, "member", "snap", "db"), 32<<10)
}

// Serve serves s's API on a free loopback port, as o says, and runs s
// until stop; with wait it returns once s uploads.
func Serve(s *sidecar.Sidecar, o sidecar.ServeOptions, wait bool) (url string, stop func(), err error) {
	listening := make(chan string, 1)
	o.Listen, o.OnListening = "127.0.0.1:0", func(addr string) { listening <- addr }
	stop, done, err := run(s, wait, func(ctx context.Context) error { return s.Serve(ctx, o) })
	if err != nil {
		return "", nil, err
	}
	select {
	case addr := <-listening:
		scheme := "http"
		if o.TLS != nil {
			scheme = "https"
		}
		return scheme + "://" + addr, stop, nil
	case err := <-done:
		return "", nil, err
	}
}

// Sidecar runs s, with no API, until stop; with wait it returns once s
// uploads.
func Sidecar(s *sidecar.Sidecar, wait bool) (stop func(), err error) {
	stop, _, err = run(s, wait, s.Run)
	return stop, err
}

// run runs f until stop, and waits until s uploads when wait is set; done
// gets f's error should it return first.
func run(s *sidecar.Sidecar, wait bool, f func(context.Context) error) (stop func(), done chan error, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- f(ctx) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "sidecar:", err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for wait && !s.Uploader() {
		if time.Now().After(deadline) {
			stop()
			return nil, nil, errors.New("the sidecar does not upload after 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return stop, done, nil
}

// RoundTrip is what every division must survive: it writes keys, has
// backup take them, stops the member, damages its database, starts it
// again with start, and checks every key came back, printing each step.
func RoundTrip(ctx context.Context, cli *clientv3.Client, dataDir string, m *Running, backup func() error, start func() (*Running, error)) (*Running, error) {
	written := map[string]string{}
	if err := Write(ctx, cli, written, "roundtrip", 500); err != nil {
		return m, err
	}
	if err := backup(); err != nil {
		return m, fmt.Errorf("back up: %w", err)
	}
	fmt.Println("wrote 500 keys and backed them up")
	if err := m.Stop(); err != nil {
		return nil, err
	}
	if err := Damage(dataDir); err != nil {
		return nil, err
	}
	fmt.Println("stopped the member and cut its database to 32 KiB")
	m, err := start()
	if err != nil {
		return nil, err
	}
	if aside, _ := filepath.Glob(dataDir + ".bak-*"); len(aside) == 0 {
		return m, errors.New("the damaged data dir was not restored: nothing was moved aside")
	}
	rev, err := Check(ctx, cli, written)
	if err != nil {
		return m, err
	}
	fmt.Printf("started again: all %d keys are back, at revision %d\n", len(written), rev)
	return m, nil
}
