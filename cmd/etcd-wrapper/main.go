package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr/etcdbrapi"
	_ "github.com/etcdkit/etcdkit/store/azure"
	_ "github.com/etcdkit/etcdkit/store/gcs"
	_ "github.com/etcdkit/etcdkit/store/s3"
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/wrapper"
)

func main() {
	os.Exit(cli.Main("etcd-wrapper", func() int { return run(os.Args[1:]) }))
}

func run(args []string) int {
	var (
		o                                       wrapper.Options
		codec                                   cli.Codec
		etcdConfig, flagsFile, storeURL, init   string
		sidecarURL, sidecarTokenFile, onCorrupt string
		logFlags                                cli.Log
		etcd                                    cli.Etcd
		sidecarTLS                              tlsfiles.Files
		storeTimeout                            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "etcd-wrapper --config etcd.yaml",
		Short: "Prepare an etcd member's data dir, start etcd and serve its probes",
		Long: `etcd-wrapper starts one etcd member. It reads etcd's own YAML configuration file, strictly:
a key etcd 3.7 does not read is an error naming its replacement. Before etcd starts it
validates the data dir (a quick check after a clean stop, a full one after a crash) and
acts on the verdict: restore a lone member from --store, rejoin a multi-member cluster as
a learner, bootstrap or join as the live cluster says. With --init=sidecar it asks the
sidecar's API to do the validation and restore; with --init=etcdbr it validates and decides
itself and leaves restores to a sidecar that speaks etcd-backup-restore's protocol
(etcd-backup-restore, or etcd-backup server), through its /initialization endpoints. It serves /livez, /readyz and /healthz
on --listen. On SIGTERM it stops etcd, leaves a clean-shutdown marker and exits 0; if
etcd stops by itself it exits 1.

It reaches its own member and the others with what etcd's configuration says
(client-transport-security: the CA bundle, and client-cert-file or cert-file as its
client certificate); --cacert, --cert, --key, --user and --password-file replace or
add to that.

Every flag can also come from ETCDKIT_<FLAG> or a YAML file given with --flags-file.

Exit codes:
  0  stopped by SIGTERM or SIGINT
  1  etcd failed, or the member must not start (the log says why)
  2  the command line or etcd's configuration is wrong`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.Bind(cmd, "flags-file"); err != nil {
				return cli.Usage(err)
			}
			if err := etcd.Check(); err != nil {
				return cli.Usage(err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log, err := logFlags.Logger(os.Stderr)
			if err != nil {
				return cli.Usage(err)
			}
			o.Logger = log
			o.Init = wrapper.Init(init)
			switch {
			case o.Init != wrapper.InitSelf && o.Init != wrapper.InitSidecar && o.Init != wrapper.InitEtcdBR:
				return cli.Usage(fmt.Errorf("--init %q: self, sidecar or etcdbr", init))
			case o.Init != wrapper.InitSelf && sidecarURL == "":
				return cli.Usage(fmt.Errorf("--init %s needs --sidecar-url", init))
			}
			if err := errors.Join(
				cli.Durations{{"sidecar-timeout", o.SidecarTimeout, false}, {"join-timeout", o.JoinTimeout, false}}.Check(),
				cli.AtLeast("keep-moved-aside", int64(o.KeepMovedAside), -1),
				cli.URLs("peer-endpoints", o.Endpoints...)); err != nil {
				return err
			}
			sidecarTLS.Names = tlsfiles.Names{CA: "--sidecar-cacert", Cert: "--sidecar-cert", Key: "--sidecar-key"}
			if o.Init == wrapper.InitEtcdBR {
				if err := cli.URLs("sidecar-url", sidecarURL); err != nil {
					return err
				}
				tc, err := sidecarTLS.NewClient(log)
				if err != nil {
					return cli.Usage(err)
				}
				// etcd-wrapper's bound on each call to the sidecar.
				hc := &http.Client{Transport: tc.Transport(10 * time.Second), Timeout: time.Minute}
				o.EtcdBR = &etcdbrapi.Client{Base: sidecarURL, HTTP: hc, Logger: log}
			}
			switch {
			case etcdConfig != "":
				if o.Config, err = wrapper.LoadConfig(etcdConfig); err != nil {
					return cli.Usage(err)
				}
			case o.Init == wrapper.InitEtcdBR:
				// As etcd-druid's pods run: only the sidecar has the
				// configuration.
				if o.Config, err = wrapper.ServedConfig(ctx, o.EtcdBR, o.SidecarTimeout, log); err != nil {
					return err
				}
			default:
				return cli.Usage(errors.New("--config (etcd's configuration file) is required; with --init=etcdbr the sidecar serves it"))
			}
			if o.Codec, err = codec.Codec(); err != nil {
				return cli.Usage(err)
			}
			conn := etcd.Apply(wrapper.ClientConn(o.Config))
			o.Conn = &conn
			if storeURL != "" {
				if o.Store, err = cli.OpenStore(ctx, storeURL, storeTimeout); err != nil {
					return err
				}
			}
			switch onCorrupt {
			case "refuse":
			case "wipe":
				o.WipeOnCorrupt = true
			default:
				return cli.Usage(fmt.Errorf("--on-corrupt %q: refuse or wipe", onCorrupt))
			}
			if o.Init == wrapper.InitSidecar {
				o.Sidecar = &api.Client{URL: sidecarURL, TLS: sidecarTLS}
				if err := o.Sidecar.Check(); err != nil {
					return cli.Usage(err)
				}
				if sidecarTokenFile != "" {
					b, err := os.ReadFile(sidecarTokenFile)
					if err != nil {
						return cli.Usage(fmt.Errorf("--sidecar-token-file: %w", err))
					}
					o.Sidecar.Token = strings.TrimSpace(string(b))
				}
			}
			return wrapper.Run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&etcdConfig, "config", "", "etcd's YAML configuration file")
	f.StringVar(&flagsFile, "flags-file", "", "YAML file of this wrapper's flag values")
	f.StringVar(&init, "init", "self", "who prepares the data dir: self, sidecar (etcd-backup serve's API) or etcdbr (an etcd-backup-restore sidecar, or etcd-backup server: it restores, the wrapper validates and decides membership)")
	f.StringVar(&storeURL, "store", "", "backups to restore from (file://, s3://, gs://, azblob://); empty: none")
	f.DurationVar(&storeTimeout, "store-timeout", 2*time.Minute, cli.StoreTimeout)
	codec.ReadFlags(f)
	f.StringSliceVar(&o.Endpoints, "peer-endpoints", nil, "client URLs of the other members, asked before joining")
	f.StringVar(&sidecarURL, "sidecar-url", "", "the sidecar's URL, for --init=sidecar or etcdbr")
	f.StringVar(&sidecarTokenFile, "sidecar-token-file", "", "the sidecar API's bearer token")
	f.StringVar(&sidecarTLS.CA, "sidecar-cacert", "", "CA bundle that signed the sidecar's certificate, for an https --sidecar-url")
	f.StringVar(&sidecarTLS.Cert, "sidecar-cert", "", "client certificate for the sidecar's API, where it takes client certificates")
	f.StringVar(&sidecarTLS.Key, "sidecar-key", "", "the client certificate's key")
	etcd.Flags(f)
	f.DurationVar(&o.SidecarTimeout, "sidecar-timeout", 5*time.Minute, "how long the sidecar is waited for")
	f.StringVar(&onCorrupt, "on-corrupt", "refuse", "with no store, a corrupt data dir: refuse, or wipe (move aside and rejoin; the peers hold the data)")
	f.DurationVar(&o.JoinTimeout, "join-timeout", 5*time.Minute, "how long to wait for the member restoring the cluster")
	cli.KeepMovedAside(f, &o.KeepMovedAside)
	f.StringVar(&o.Listen, "listen", "127.0.0.1:2382", "address of /livez, /readyz and /healthz")
	logFlags.Flags(f)
	cmd.AddCommand(cli.Version(func() bool { return false }))
	cli.Strict(cmd)
	cmd.SetArgs(args)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		// Stopped by a signal, even before etcd started.
		return 0
	case cli.IsUsage(err):
		fmt.Fprintf(os.Stderr, "etcd-wrapper: %v\n", err)
		return 2
	}
	fmt.Fprintf(os.Stderr, "etcd-wrapper: %v\n", err)
	return 1
}
