package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/history"
)

func verifyCmd(g *globals) *cobra.Command {
	var (
		t       target
		against []string
		workDir string
	)
	cmd := &cobra.Command{
		Use:   "verify [--against ENDPOINTS]",
		Short: "Check a chain end to end, and with --against that it equals the live cluster at its revision",
		Long: `verify downloads a chain, checks every object's checksum, replays it without building a
data dir and sums the keyspace at its last revision. With --against it sums the live
cluster at that same revision and exits 3 when they differ; when the cluster has
compacted past that revision only the chain is checked, and the output says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var (
				opts history.VerifyOptions
				err  error
			)
			if opts.Read.Target, err = t.target(cmd); err != nil {
				return err
			}
			opts.WorkDir = workDir
			st, p, err := g.source(ctx, &opts.Read)
			if err != nil {
				return err
			}
			rep, err := history.Verify(ctx, st, opts)
			p.Done()
			if err != nil {
				return err
			}
			out := verifyResult{Deltas: len(rep.Chain.Deltas), Full: rep.Chain.Full.Key, Keys: rep.Digest.Keys, Revision: rep.Digest.Revision,
				SHA256: rep.Digest.SHA256, TookSeconds: rep.Took.Seconds()}
			var mismatch error
			if len(against) > 0 {
				differs, err := g.compareLive(cmd, against, rep.Digest, &out)
				if err != nil {
					return err
				}
				if differs != "" {
					mismatch = fmt.Errorf("%w: %s", errMismatch, differs)
				}
			}
			if err := g.print(out, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "chain\t%s and %d deltas\nrevision\t%d\nkeys\t%d\nsha256\t%s\n", rep.Chain.Full.Key, len(rep.Chain.Deltas), rep.Digest.Revision, rep.Digest.Keys, rep.Digest.SHA256)
				switch v := out.Live.(type) {
				case history.Digest:
					fmt.Fprintf(w, "live cluster\tDIFFERS: %s\n", v)
				case string:
					fmt.Fprintf(w, "live cluster\t%s\n", v)
				}
				// Equal at the chain's revision says nothing of what the
				// cluster wrote after it: the backups are that far behind.
				if head := out.LiveRevision; head != nil && *head > rep.Digest.Revision {
					fmt.Fprintf(w, "live revision\t%d (%d past the backups)\n", *head, *head-rep.Digest.Revision)
				}
			}); err != nil {
				return err
			}
			return mismatch
		},
	}
	t.flags(cmd)
	cmd.Flags().StringSliceVar(&against, "against", nil, "client URLs of the live cluster to compare with")
	cmd.Flags().StringVar(&workDir, "work-dir", os.TempDir(), "where the chain is downloaded and replayed")
	g.secondaryFlag(cmd)
	return cmd
}

// compareLive compares the backups' digest with the cluster at against,
// and records what it found in out; differs says how, when they differ or
// the cluster is behind the backups.
func (g *globals) compareLive(cmd *cobra.Command, against []string, d history.Digest, out *verifyResult) (differs string, err error) {
	live, head, note, err := g.liveDigest(cmd, against, d.Revision)
	if err != nil {
		return "", err
	}
	out.LiveRevision = &head
	switch {
	case note != "":
		out.Live = note
		if head < d.Revision {
			// The backups hold writes the cluster never had.
			return note, nil
		}
	case live != d:
		out.Live = live
		return fmt.Sprintf("the backup has %s; the cluster has %s", d, live), nil
	default:
		out.Live = "equal"
	}
	return "", nil
}

// liveDigest sums the live cluster at rev, or says why it cannot, and
// reads the cluster's own revision.
func (g *globals) liveDigest(cmd *cobra.Command, endpoints []string, rev int64) (history.Digest, int64, string, error) {
	cli, err := etcdclient.New(cmd.Context(), g.conn(endpoints))
	if err != nil {
		return history.Digest{}, 0, "", err
	}
	defer func() { _ = cli.Close() }()
	head, err := cli.Get(cmd.Context(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		return history.Digest{}, 0, "", err
	}
	if h := head.Header.Revision; h < rev {
		return history.Digest{}, h, fmt.Sprintf("the cluster is at revision %d, behind the backups' %d: it never held what they end at "+
			"(another cluster, or one restored from older data)", h, rev), nil
	}
	live, err := history.LiveDigest(cmd.Context(), cli, rev)
	if errors.Is(err, rpctypes.ErrCompacted) {
		return live, head.Header.Revision, fmt.Sprintf("not compared: the cluster has compacted past revision %d", rev), nil
	}
	if err != nil {
		return live, 0, "", err
	}
	return live, head.Header.Revision, "", nil
}

// verifyResult is what verify prints.
type verifyResult struct {
	Deltas int    `json:"deltas"`
	Full   string `json:"full"`
	Keys   int64  `json:"keys"`
	// Live, with --against: "equal", the cluster's digest where it
	// differs, or why it was not compared.
	Live         any     `json:"live,omitempty"`
	LiveRevision *int64  `json:"live_revision,omitempty"`
	Revision     int64   `json:"revision"`
	SHA256       string  `json:"sha256"`
	TookSeconds  float64 `json:"took_seconds"`
}
