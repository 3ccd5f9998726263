package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/history"
)

func diffCmd(g *globals) *cobra.Command {
	var (
		from, to int64
		prefix   string
		work     string
		sum      summary
	)
	cmd := &cobra.Command{
		Use:   "diff --from R1 [--to R2] [--prefix P]",
		Short: "What changed between two revisions, from the backups; the cluster is not touched",
		Long: `diff reads the keys (under --prefix, or all) at revision R1 and at R2 (default: the
latest) from the backups, replayed in a scratch directory (once, when R2's chain holds R1),
and prints every key created (+), deleted (-) or put again (~) in between.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if from <= 0 || to < 0 || to != 0 && to < from {
				return cli.Usage(errors.New("--from is a revision, and --to (0: the latest) one at or after it"))
			}
			if err := sum.check(); err != nil {
				return err
			}
			opts := history.StateOptions{WorkDir: work, Keys: history.Keys{Key: prefix, Prefix: true}}
			st, p, err := g.source(ctx, &opts.Read)
			if err != nil {
				return err
			}
			opts.Read.Target.Revision = to
			a, b, err := history.ReadStates(ctx, st, opts, from)
			p.Done()
			if err != nil {
				return err
			}
			return printDiff(g, a, b, prefix, sum)
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "the earlier revision")
	cmd.Flags().Int64Var(&to, "to", 0, "the later revision (default: the latest)")
	cmd.Flags().StringVar(&prefix, "prefix", "", "only the keys that start with this")
	sum.flags(cmd)
	cmd.Flags().StringVar(&work, "work-dir", "", "where the chains are replayed (default: the system's temporary directory)")
	g.secondaryFlag(cmd)
	return cmd
}

func printDiff(g *globals, a, b history.State, prefix string, sum summary) error {
	changes := history.Diff(a, b)
	list := make([]changeJSON, len(changes))
	for i, ch := range changes {
		kind := "changed"
		switch {
		case ch.From == nil:
			kind = "created"
		case ch.To == nil:
			kind = "deleted"
		}
		list[i] = changeJSON{Key: ch.Key, Change: kind, From: keyOut(ch.From), To: keyOut(ch.To)}
	}
	subs := history.SummarizeDiff(prefix, sum.depth, a, b)
	out := diffResult{Changes: list, From: a.Revision, SubPrefixes: subPrefixes(subs), To: b.Revision}
	return g.print(out, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "# from revision %d to %d: %d keys changed\n", a.Revision, b.Revision, len(list))
		if sum.on {
			printDiffSubPrefixes(w, subs)
			return
		}
		for _, ch := range list {
			switch ch.Change {
			case "created":
				fmt.Fprintf(w, "+\t%s\t%q\t(at %d)\n", ch.Key, ch.To.Value, ch.To.ModRevision)
			case "deleted":
				fmt.Fprintf(w, "-\t%s\t%q\t(was at %d)\n", ch.Key, ch.From.Value, ch.From.ModRevision)
			default:
				fmt.Fprintf(w, "~\t%s\t%q → %q\t(%d → %d)\n", ch.Key, ch.From.Value, ch.To.Value, ch.From.ModRevision, ch.To.ModRevision)
			}
		}
	})
}

// changeJSON is a key's change between the two states.
type changeJSON struct {
	Key    string   `json:"key"`
	Change string   `json:"change"`
	From   *keyJSON `json:"from,omitempty"`
	To     *keyJSON `json:"to,omitempty"`
}

// diffResult is what diff prints.
type diffResult struct {
	Changes     []changeJSON        `json:"changes"`
	From        int64               `json:"from"`
	SubPrefixes []history.SubPrefix `json:"sub_prefixes"`
	To          int64               `json:"to"`
}
