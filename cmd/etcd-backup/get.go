package main

import (
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/history"
)

// keyJSON is a key as get and diff print it with -o json.
type keyJSON struct {
	Key            string `json:"key"`
	Value          string `json:"value"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Version        int64  `json:"version"`
	Lease          string `json:"lease,omitempty"`
}

func keyOut(kv *mvccpb.KeyValue) *keyJSON {
	if kv == nil {
		return nil
	}
	k := &keyJSON{Key: string(kv.Key), Value: string(kv.Value), CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version}
	if kv.Lease != 0 {
		k.Lease = strconv.FormatInt(kv.Lease, 16)
	}
	return k
}

// keysOf picks the keys of an optional KEY argument or --prefix.
func keysOf(args []string, prefix string, prefixSet bool) (history.Keys, error) {
	switch {
	case len(args) == 1 && prefixSet:
		return history.Keys{}, cli.Usage(errors.New("give a KEY or --prefix, not both"))
	case len(args) == 1:
		return history.Keys{Key: args[0]}, nil
	}
	return history.Keys{Key: prefix, Prefix: true}, nil
}

func getCmd(g *globals) *cobra.Command {
	var (
		t      target
		prefix string
		work   string
		sum    summary
	)
	cmd := &cobra.Command{
		Use:   "get [KEY | --prefix P] [--revision R | --time T]",
		Short: "Read keys as they were, from the backups; the cluster is not touched",
		Long: `get replays the chain that holds the revision or time asked for (default: the latest)
in a scratch directory and prints the key, the keys under a prefix, or with neither every
key, as they were then. The cluster is never contacted.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			opts := history.StateOptions{WorkDir: work}
			if err := sum.check(); err != nil {
				return err
			}
			var err error
			if opts.Keys, err = keysOf(args, prefix, cmd.Flags().Changed("prefix")); err != nil {
				return err
			}
			if opts.Read.Target, err = t.target(cmd); err != nil {
				return err
			}
			state, err := g.readState(ctx, opts)
			if err != nil {
				return err
			}
			subs := history.Summarize(opts.Keys.Key, sum.depth, state.KVs)
			kvs := make([]*keyJSON, len(state.KVs))
			for i, kv := range state.KVs {
				kvs[i] = keyOut(kv)
			}
			out := getResult{Bytes: totalBytes(subs), Count: len(state.KVs), Deltas: len(state.Chain.Deltas), Full: state.Chain.Full.Key,
				KVs: kvs, Revision: state.Revision, SubPrefixes: subPrefixes(subs)}
			return g.print(out, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "# revision %d, from %s and %d deltas: %d keys, %s\n", state.Revision, state.Chain.Full.Key, len(state.Chain.Deltas), len(kvs), size(totalBytes(subs)))
				if sum.on {
					printSubPrefixes(w, subs)
					return
				}
				fmt.Fprintf(w, "KEY\tMOD\tVERSION\tLEASE\tVALUE\n")
				for _, kv := range kvs {
					fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%q\n", kv.Key, kv.ModRevision, kv.Version, kv.Lease, kv.Value)
				}
			})
		},
	}
	t.flags(cmd)
	sum.flags(cmd)
	cmd.Flags().StringVar(&prefix, "prefix", "", "every key that starts with this")
	cmd.Flags().StringVar(&work, "work-dir", "", "where the chain is replayed (default: the system's temporary directory)")
	g.secondaryFlag(cmd)
	return cmd
}

// getResult is what get prints.
type getResult struct {
	Bytes       int64               `json:"bytes"`
	Count       int                 `json:"count"`
	Deltas      int                 `json:"deltas"`
	Full        string              `json:"full"`
	KVs         []*keyJSON          `json:"kvs"`
	Revision    int64               `json:"revision"`
	SubPrefixes []history.SubPrefix `json:"sub_prefixes"`
}

// subPrefixes is s, or an empty list for JSON's [].
func subPrefixes(s []history.SubPrefix) []history.SubPrefix {
	if s == nil {
		return []history.SubPrefix{}
	}
	return s
}
