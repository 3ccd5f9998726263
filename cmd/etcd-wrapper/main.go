package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr/etcdbrapi"
	"github.com/etcdkit/etcdkit/startup"
	_ "github.com/etcdkit/etcdkit/store/all" // every backend's URL scheme
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/wrapper"
)

func main() {
	os.Exit(cli.Main("etcd-wrapper", func() int { return run(os.Args[1:]) }))
}

// flags are the command line, before they become wrapper.Options.
type flags struct {
	o                                       wrapper.Options
	codec                                   cli.Codec
	etcdConfig, flagsFile, storeURL, init   string
	secondURL, etcdBinary                   string
	sidecarURL, sidecarTokenFile, onCorrupt string
	logFlags                                cli.Log
	etcd                                    cli.Etcd
	sidecarTLS                              tlsfiles.Files
	storeTimeout, sidecarTimeout            time.Duration
	// release is the etcd the member runs; file its configuration, read
	// for it.
	release etcdversion.Version
	file    *wrapper.File
}

func run(args []string) int {
	var fl flags
	cmd := &cobra.Command{
		Use:   "etcd-wrapper --config etcd.yaml",
		Short: "Prepare an etcd member's data dir, start etcd and serve its probes",
		Long: `etcd-wrapper starts one etcd member: the etcd 3.7 built into it, or with --etcd an etcd
server binary of the operator's release (3.5, 3.6 or 3.7), which it runs as its child. It
reads etcd's own YAML configuration file, strictly, for that release: a key the release
does not read is an error naming its replacement. Before etcd starts it
validates the data dir (a quick check after a clean stop, a full one after a crash) and
acts on the verdict: restore a lone member from --store, rejoin a multi-member cluster as
a learner, bootstrap or join as the live cluster says. Another release's data dir is a
fact, not damage: it is refused, naming the releases that start on it, and a member joins
a cluster only where etcd lets its release join. A member the cluster removed on purpose
stays out: the wrapper does not start etcd and answers /readyz 503 with the reason until
it is stopped. With --init=sidecar it asks the
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
  1  etcd failed, or the member must not start (the log says why; also a member
     held out because the cluster removed it, when it is stopped)
  2  the command line or etcd's configuration is wrong`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.Bind(cmd, "flags-file"); err != nil {
				return cli.Usage(err)
			}
			if err := fl.etcd.Check(); err != nil {
				return cli.Usage(err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := fl.options(cmd.Context())
			if err != nil {
				return err
			}
			return remedied(wrapper.Run(cmd.Context(), o))
		},
	}
	fl.bind(cmd.Flags())
	cmd.AddCommand(cli.Version(nil), startEtcd(&fl), cli.Man())
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

// bind registers the wrapper's flags on f.
func (fl *flags) bind(f *pflag.FlagSet) {
	f.StringVar(&fl.etcdConfig, "config", "", "etcd's YAML configuration file")
	etcdBinary(f, fl)
	f.StringVar(&fl.flagsFile, "flags-file", "", "YAML file of this wrapper's flag values")
	f.StringVar(&fl.init, "init", "self", "who prepares the data dir: self, sidecar (etcd-backup serve's API) or etcdbr (an etcd-backup-restore sidecar, or etcd-backup server: it restores, the wrapper validates and decides membership)")
	f.StringVar(&fl.storeURL, "store", "", "backups to restore from (file://, s3://, gs://, azblob://); empty: none")
	f.StringVar(&fl.secondURL, "secondary-store", "", "a second site with copies of the backups, restored from when --store cannot be listed or its newest chain is broken")
	f.DurationVar(&fl.storeTimeout, "store-timeout", 2*time.Minute, cli.StoreTimeout)
	fl.codec.ReadFlags(f)
	f.StringSliceVar(&fl.o.Endpoints, "peer-endpoints", nil, "client URLs of the other members, asked before joining")
	f.StringVar(&fl.sidecarURL, "sidecar-url", "", "the sidecar's URL, for --init=sidecar or etcdbr")
	f.StringVar(&fl.sidecarTokenFile, "sidecar-token-file", "", "the sidecar API's bearer token")
	f.StringVar(&fl.sidecarTLS.CA, "sidecar-cacert", "", "CA bundle that signed the sidecar's certificate, for an https --sidecar-url")
	f.StringVar(&fl.sidecarTLS.Cert, "sidecar-cert", "", "client certificate for the sidecar's API, where it takes client certificates")
	f.StringVar(&fl.sidecarTLS.Key, "sidecar-key", "", "the client certificate's key")
	fl.etcd.Flags(f)
	f.DurationVar(&fl.sidecarTimeout, "sidecar-timeout", 5*time.Minute, "how long the sidecar is waited for")
	f.StringVar(&fl.onCorrupt, "on-corrupt", "refuse", "with no store, a corrupt data dir: refuse, or wipe (move aside and rejoin; the peers hold the data)")
	f.DurationVar(&fl.o.JoinTimeout, "join-timeout", 5*time.Minute, "how long to wait for the member restoring the cluster")
	cli.KeepMovedAside(f, &fl.o.KeepMovedAside)
	f.StringVar(&fl.o.Listen, "listen", "127.0.0.1:2382", "address of /livez, /readyz and /healthz")
	fl.logFlags.Flags(f)
}

// etcdBinary registers --etcd, which both commands take.
func etcdBinary(f *pflag.FlagSet, fl *flags) {
	f.StringVar(&fl.etcdBinary, "etcd", "", "an etcd server binary (3.5, 3.6 or 3.7) to run as this wrapper's child; empty: the etcd "+restore.Module.String()+" built into this wrapper")
}

// options turns the flags into the wrapper's options: etcd's
// configuration, the connection, and the Source --init names.
func (fl *flags) options(ctx context.Context) (wrapper.Options, error) {
	o := fl.o
	log, err := fl.logFlags.Logger(os.Stderr)
	if err != nil {
		return o, cli.Usage(err)
	}
	o.Logger = log
	switch {
	case fl.init != "self" && fl.init != "sidecar" && fl.init != "etcdbr":
		return o, cli.Usage(fmt.Errorf("--init %q: self, sidecar or etcdbr", fl.init))
	case fl.init != "self" && fl.sidecarURL == "":
		return o, cli.Usage(fmt.Errorf("--init %s needs --sidecar-url", fl.init))
	}
	if err := errors.Join(
		cli.Durations{{"sidecar-timeout", fl.sidecarTimeout, false}, {"join-timeout", o.JoinTimeout, false}}.Check(),
		cli.AtLeast("keep-moved-aside", int64(o.KeepMovedAside), -1),
		cli.URLs("peer-endpoints", o.Endpoints...)); err != nil {
		return o, err
	}
	switch fl.onCorrupt {
	case "refuse":
	case "wipe":
		o.WipeOnCorrupt = true
	default:
		return o, cli.Usage(fmt.Errorf("--on-corrupt %q: refuse or wipe", fl.onCorrupt))
	}
	fl.sidecarTLS.Names = tlsfiles.Names{CA: "--sidecar-cacert", Cert: "--sidecar-cert", Key: "--sidecar-key"}
	fl.release = restore.Module
	if fl.etcdBinary != "" {
		if fl.release, err = wrapper.ReleaseOf(ctx, fl.etcdBinary); err != nil {
			return o, cli.Usage(fmt.Errorf("--etcd: %w", err))
		}
		log.Info("etcd-wrapper: runs etcd as a process", "binary", fl.etcdBinary, "etcd", fl.release)
	}
	switch fl.init {
	case "etcdbr":
		err = fl.etcdBR(ctx, &o)
	case "sidecar":
		err = fl.remote(&o)
	default:
		err = fl.local(ctx, &o)
	}
	if err != nil {
		return o, err
	}
	o.Runner = fl.runner(log)
	conn := fl.etcd.Apply(wrapper.ClientConn(o.Config))
	o.Conn = &conn
	return o, nil
}

// config reads etcd's configuration file for the release that runs it.
func (fl *flags) config() (*embed.Config, error) {
	if fl.etcdConfig == "" {
		return nil, cli.Usage(errors.New("--config (etcd's configuration file) is required; with --init=etcdbr the sidecar serves it"))
	}
	f, err := wrapper.LoadFile(fl.etcdConfig, fl.release)
	if err != nil {
		return nil, cli.Usage(err)
	}
	fl.file = f
	return f.Config, nil
}

// runner is what runs etcd: the binary --etcd names, with the
// configuration read for its release, or the etcd built in.
func (fl *flags) runner(log *slog.Logger) wrapper.Runner {
	if fl.etcdBinary == "" {
		return wrapper.Embedded{}
	}
	return &wrapper.Process{Path: fl.etcdBinary, File: fl.file, Logger: log}
}

// local is --init=self: this process restores, from --store when given.
func (fl *flags) local(ctx context.Context, o *wrapper.Options) error {
	var err error
	if o.Config, err = fl.config(); err != nil {
		return err
	}
	src := &startup.Local{KeepMovedAside: o.KeepMovedAside, Logger: o.Logger}
	if src.Codec, err = fl.codec.Codec(); err != nil {
		return cli.Usage(err)
	}
	switch {
	case fl.secondURL != "" && fl.storeURL == "":
		return cli.Usage(errors.New("--secondary-store needs --store: the second site holds copies of its backups"))
	case fl.secondURL != "" && fl.secondURL == fl.storeURL:
		return cli.Usage(errors.New("--secondary-store is --store: a second site must be another store"))
	case fl.secondURL != "":
		// Either site may not answer: the start-up reads the one with a
		// whole chain, and neither keeps etcd from starting on its own.
		if src.Store, err = cli.OpenSite(ctx, fl.storeURL, fl.storeTimeout, o.Logger); err != nil {
			return err
		}
		if src.Secondary, err = cli.OpenSite(ctx, fl.secondURL, fl.storeTimeout, o.Logger); err != nil {
			return fmt.Errorf("--secondary-store: %w", err)
		}
	case fl.storeURL != "":
		if src.Store, err = cli.OpenStore(ctx, fl.storeURL, fl.storeTimeout, o.Logger); err != nil {
			return err
		}
	}
	o.Preparer = src
	return nil
}

// remote is --init=sidecar: the sidecar's API checks and restores.
func (fl *flags) remote(o *wrapper.Options) error {
	var err error
	if o.Config, err = fl.config(); err != nil {
		return err
	}
	c := &api.Client{URL: fl.sidecarURL, TLS: fl.sidecarTLS}
	if err := c.Check(); err != nil {
		return cli.Usage(err)
	}
	if fl.sidecarTokenFile != "" {
		b, err := os.ReadFile(fl.sidecarTokenFile)
		if err != nil {
			return cli.Usage(fmt.Errorf("--sidecar-token-file: %w", err))
		}
		c.Token = strings.TrimSpace(string(b))
	}
	o.Preparer = startup.Remote{Client: c, Wait: fl.sidecarTimeout, Logger: o.Logger}
	return nil
}

// etcdBR is --init=etcdbr: a sidecar that speaks etcd-backup-restore's
// protocol restores, and serves etcd's configuration when --config is not
// given, as in etcd-druid's pods.
func (fl *flags) etcdBR(ctx context.Context, o *wrapper.Options) error {
	if err := cli.URLs("sidecar-url", fl.sidecarURL); err != nil {
		return err
	}
	tc, err := fl.sidecarTLS.NewClient(o.Logger)
	if err != nil {
		return cli.Usage(err)
	}
	// etcd-wrapper's bound on each call to the sidecar.
	hc := &http.Client{Transport: tc.Transport(10 * time.Second), Timeout: time.Minute}
	c := &etcdbrapi.Client{Base: fl.sidecarURL, HTTP: hc, Logger: o.Logger}
	if fl.etcdConfig != "" {
		o.Config, err = fl.config()
	} else if fl.file, err = wrapper.ServedConfig(ctx, c, fl.release, fl.sidecarTimeout, o.Logger); err == nil {
		o.Config = fl.file.Config
	}
	if err != nil {
		return err
	}
	o.Preparer = startup.EtcdBR{Client: c, Wait: fl.sidecarTimeout, Logger: o.Logger}
	return nil
}

// remedyFlags name the start-up's remedies by this command's flags.
var remedyFlags = map[startup.Remedy]string{startup.GiveStore: "--store", startup.AllowWipe: "--on-corrupt=wipe"}

// remedied adds to a refusal the flags that would let the member start.
func remedied(err error) error {
	var r *startup.Refusal
	if !errors.As(err, &r) || len(r.Plan.Remedies) == 0 {
		return err
	}
	var fs []string
	for _, rem := range r.Plan.Remedies {
		fs = append(fs, remedyFlags[rem])
	}
	return fmt.Errorf("%w (etcd-wrapper: %s)", err, strings.Join(fs, " or "))
}
