package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkit/etcdkit/wrapper"
)

// etcd-druid's arguments to Gardener's etcd-wrapper become this wrapper's
// --init=etcdbr: the sidecar where druid's pod has it, over HTTPS with the
// CA bundle druid mounts, etcd's client certificate, the probes on the
// wrapper port; the other members are asked at their peer hosts' client
// port, as druid advertises them.
func TestStartEtcdTakesDruidsArguments(t *testing.T) {
	parse := func(args ...string) (gardenerFlags, error) {
		var g gardenerFlags
		fs := pflag.NewFlagSet("start-etcd", pflag.ContinueOnError)
		g.register(fs)
		return g, fs.Parse(args)
	}
	g, err := parse("--backup-restore-host-port=etcd-main-local:8080", "--etcd-server-name=etcd-main-local",
		"--backup-restore-tls-enabled=true", "--backup-restore-ca-cert-bundle-path=/var/etcdbr/ssl/ca/bundle.crt",
		"--etcd-client-cert-path=/var/etcd/ssl/client/tls.crt", "--etcd-client-key-path=/var/etcd/ssl/client/tls.key",
		"--etcd-client-port=2379", "--etcd-wrapper-port=9095")
	if err != nil {
		t.Fatal(err)
	}
	var fl flags
	if err := g.apply(&fl); err != nil {
		t.Fatal(err)
	}
	if fl.init != "etcdbr" || fl.sidecarURL != "https://etcd-main-local:8080" || fl.sidecarTLS.CA != "/var/etcdbr/ssl/ca/bundle.crt" ||
		fl.etcd.Cert != "/var/etcd/ssl/client/tls.crt" || fl.etcd.Key != "/var/etcd/ssl/client/tls.key" ||
		fl.etcd.ServerName != "etcd-main-local" || fl.o.Listen != ":9095" {
		t.Fatalf("became init %s, sidecar %s (CA %s), etcd client %s %s for %s, probes on %s",
			fl.init, fl.sidecarURL, fl.sidecarTLS.CA, fl.etcd.Cert, fl.etcd.Key, fl.etcd.ServerName, fl.o.Listen)
	}
	cfg := embed.NewConfig()
	cfg.Name = "etcd-main-1"
	cfg.InitialCluster = "etcd-main-0=https://etcd-main-0.etcd-main-peer.etcd.svc:2380,etcd-main-1=https://etcd-main-1.etcd-main-peer.etcd.svc:2380," +
		"etcd-main-2=https://etcd-main-2.etcd-main-peer.etcd.svc:2380,etcd-main-2=https://10.0.0.7:2380"
	cfg.ClientTLSInfo.CertFile = "/var/etcd/ssl/server/tls.crt"
	got := g.peerEndpoints(wrapper.Options{Config: cfg})
	want := []string{"https://etcd-main-0.etcd-main-peer.etcd.svc:2379", "https://etcd-main-2.etcd-main-peer.etcd.svc:2379", "https://10.0.0.7:2379"}
	if !slices.Equal(got, want) {
		t.Fatalf("the other members asked at %v, want %v", got, want)
	}
	for _, bad := range []string{"--backup-restore-host-port=etcd-main-local", "--etcd-wrapper-port=0", "--etcd-client-cert-path=/c"} {
		g, err := parse(bad)
		if err == nil {
			err = g.apply(&flags{})
		}
		if err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
