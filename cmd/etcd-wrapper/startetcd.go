package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/wrapper"
)

// gardenerFlags are Gardener etcd-wrapper's command line, as etcd-druid
// writes it into the etcd container of its pods.
type gardenerFlags struct {
	hostPort, caBundle, serverName string
	clientCert, clientKey          string
	tlsEnabled                     bool
	clientPort, wrapperPort        int
}

// startEtcd is `start-etcd`: Gardener etcd-wrapper's command, so that
// etcd-druid's pod spec runs this image in its place unchanged. It is
// --init=etcdbr with the sidecar and the probes where etcd-druid puts
// them: the configuration from the sidecar's /config, the probes on
// --etcd-wrapper-port, over HTTPS with etcd's own serving certificate
// when etcd's client port is TLS (as Gardener's wrapper serves them).
func startEtcd(fl *flags) *cobra.Command {
	var g gardenerFlags
	cmd := &cobra.Command{
		Use:   "start-etcd",
		Short: "Start etcd as etcd-druid's pods start Gardener's etcd-wrapper (its flags, its ports)",
		Long: `start-etcd takes Gardener etcd-wrapper's flags, as etcd-druid writes them into its pods, and
runs this wrapper with --init=etcdbr: etcd's configuration comes from the backup sidecar's
/config (etcd-backup server, or etcd-backup-restore), which also restores. The probes
(/readyz, /livez, /healthz) listen on --etcd-wrapper-port, over HTTPS with etcd's serving
certificate when etcd's client-transport-security names a certificate, key and CA.`,
		Args: cobra.NoArgs,
		// etcd-druid writes Gardener's flags only: the image says which
		// etcd runs (ETCDKIT_ETCD in the images of etcd 3.5 and 3.6).
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.Bind(cmd, ""); err != nil {
				return cli.Usage(err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.apply(fl); err != nil {
				return cli.Usage(err)
			}
			o, err := fl.options(cmd.Context())
			if err != nil {
				return err
			}
			if o.ListenTLS, err = probeTLS(o); err != nil {
				return err
			}
			if len(o.Endpoints) == 0 {
				o.Endpoints = g.peerEndpoints(o)
			}
			return remedied(wrapper.Run(cmd.Context(), o))
		},
	}
	f := cmd.Flags()
	g.register(f)
	etcdBinary(f, fl)
	fl.logFlags.Flags(f)
	return cmd
}

// register registers Gardener's flags, with its defaults.
func (g *gardenerFlags) register(f *pflag.FlagSet) {
	f.StringVar(&g.hostPort, "backup-restore-host-port", ":8080", "host:port of the backup sidecar (etcd-backup server)")
	f.BoolVar(&g.tlsEnabled, "backup-restore-tls-enabled", false, "the backup sidecar serves HTTPS")
	f.StringVar(&g.caBundle, "backup-restore-ca-cert-bundle-path", "", "CA bundle that signed the backup sidecar's certificate")
	f.StringVar(&g.serverName, "etcd-server-name", "", "the name etcd's certificate is verified for when this wrapper reaches its member")
	f.IntVar(&g.clientPort, "etcd-client-port", 2379, "etcd's client port (Gardener's wrapper's; this one reaches its member as etcd's configuration says)")
	f.StringVar(&g.clientCert, "etcd-client-cert-path", "", "client certificate for etcd")
	f.StringVar(&g.clientKey, "etcd-client-key-path", "", "the client certificate's key")
	f.IntVar(&g.wrapperPort, "etcd-wrapper-port", 9095, "port of /readyz, /livez and /healthz")
}

// apply turns Gardener's flags into this wrapper's.
func (g gardenerFlags) apply(fl *flags) error {
	host, port, err := net.SplitHostPort(g.hostPort)
	if err != nil {
		return fmt.Errorf("--backup-restore-host-port %q: host:port, as etcd-druid writes it (<etcd>-local:8080): %w", g.hostPort, err)
	}
	if host == "" {
		host = "localhost"
	}
	scheme := "http"
	if g.tlsEnabled {
		scheme = "https"
	}
	if g.wrapperPort <= 0 || g.wrapperPort > 65535 || g.clientPort <= 0 || g.clientPort > 65535 {
		return errors.New("--etcd-wrapper-port and --etcd-client-port: a port from 1 to 65535")
	}
	if (g.clientCert == "") != (g.clientKey == "") {
		return errors.New("--etcd-client-cert-path and --etcd-client-key-path go together")
	}
	fl.init, fl.sidecarURL = "etcdbr", scheme+"://"+net.JoinHostPort(host, port)
	fl.sidecarTLS.CA = g.caBundle
	fl.etcd.Cert, fl.etcd.Key, fl.etcd.ServerName = g.clientCert, g.clientKey, g.serverName
	fl.o.Listen = ":" + strconv.Itoa(g.wrapperPort)
	return nil
}

// peerEndpoints are the other members' client URLs, as etcd-druid
// advertises them: on the hosts of their peer URLs, at the client port.
// /config serves each member its own advertised URLs only, and a member
// that starts must ask the others whether a cluster runs.
func (g gardenerFlags) peerEndpoints(o wrapper.Options) []string {
	scheme := "http"
	if o.Config.ClientTLSInfo.CertFile != "" {
		scheme = "https"
	}
	var out []string
	for part := range strings.SplitSeq(o.Config.InitialCluster, ",") {
		name, peer, ok := strings.Cut(strings.TrimSpace(part), "=")
		u, err := url.Parse(peer)
		if !ok || err != nil || name == o.Config.Name || u.Hostname() == "" {
			continue
		}
		ep := scheme + "://" + net.JoinHostPort(u.Hostname(), strconv.Itoa(g.clientPort))
		if !slices.Contains(out, ep) {
			out = append(out, ep)
		}
	}
	return out
}

// probeTLS is the probes' HTTPS, where Gardener's wrapper serves it: etcd's
// client port is TLS (certificate, key and CA), with etcd's certificate.
func probeTLS(o wrapper.Options) (*tls.Config, error) {
	info := o.Config.ClientTLSInfo
	if strings.TrimSpace(info.CertFile) == "" || strings.TrimSpace(info.KeyFile) == "" || strings.TrimSpace(info.TrustedCAFile) == "" {
		return nil, nil
	}
	return tlsfiles.Files{Cert: info.CertFile, Key: info.KeyFile,
		Names: tlsfiles.Names{Cert: "client-transport-security: cert-file", Key: "client-transport-security: key-file"}}.NewServer(o.Logger)
}
