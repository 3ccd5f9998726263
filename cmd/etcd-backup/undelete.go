package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/tenant"
)

func undeleteCmd(g *globals) *cobra.Command {
	var (
		t      target
		prefix string
		apply  bool
		work   string
	)
	cmd := &cobra.Command{
		Use:   "undelete --prefix P (--revision R | --time T) [--apply]",
		Short: "Write keys under a prefix back into the live cluster as they were, where they are absent",
		Long: `undelete reads the keys under --prefix as they were at --revision or --time from the
backups, then writes each back into the live cluster (--endpoints) only where it is
absent, in a transaction that checks it is still absent, so nothing written since is
ever overwritten. A key that exists with another value is reported and left alone.
Without --apply nothing is written: the report says what would be.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if prefix == "" {
				return cli.Usage(errors.New("--prefix is required: the keys to bring back (a namespace: /registry/…/NAME/)"))
			}
			opts := history.StateOptions{WorkDir: work, Keys: history.Keys{Key: prefix, Prefix: true}}
			var err error
			if opts.Read.Target, err = t.target(cmd); err != nil {
				return err
			}
			if opts.Read.Target.Revision == 0 && opts.Read.Target.Time.IsZero() {
				return cli.Usage(errors.New("--revision or --time is required: when the keys were as wanted"))
			}
			live, err := g.client(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = live.Close() }()
			past, err := g.readState(ctx, opts)
			if err != nil {
				return err
			}
			u, err := tenant.Undelete(ctx, live, past, tenant.UndeleteOptions{Apply: apply})
			if err != nil {
				return err
			}
			subs := history.Summarize(prefix, 1, past.KVs)
			out := undeleteResult{Applied: apply, Bytes: totalBytes(subs), Changed: nonNil(u.Changed), Revision: past.Revision, Same: nonNil(u.Same),
				SubPrefixes: subPrefixes(subs), WithoutLease: nonNil(u.WithoutLease), Written: nonNil(u.Written)}
			return g.print(out, func(w *tabwriter.Writer) {
				verb := "written"
				if !apply {
					verb = "to write"
					fmt.Fprintf(w, "dry run: nothing was written; run again with --apply\n")
				}
				fmt.Fprintf(w, "past state\trevision %d, %d keys (%s) under %s\n", past.Revision, len(past.KVs), size(totalBytes(subs)), prefix)
				fmt.Fprintf(w, "%s\t%d\t%s\n", verb, len(u.Written), strings.Join(u.Written, " "))
				fmt.Fprintf(w, "already as then\t%d\t%s\n", len(u.Same), strings.Join(u.Same, " "))
				fmt.Fprintf(w, "changed since, left alone\t%d\t%s\n", len(u.Changed), strings.Join(u.Changed, " "))
				if len(u.WithoutLease) > 0 {
					fmt.Fprintf(w, "written without their old lease\t%d\t%s\n", len(u.WithoutLease), strings.Join(u.WithoutLease, " "))
				}
			})
		},
	}
	t.flags(cmd)
	cmd.Flags().StringVar(&prefix, "prefix", "", "the keys to bring back")
	cmd.Flags().BoolVar(&apply, "apply", false, "write; without it, only report what would be written")
	cmd.Flags().StringVar(&work, "work-dir", "", "where the chain is replayed (default: the system's temporary directory)")
	g.secondaryFlag(cmd)
	return cmd
}

// undeleteResult is what undelete prints.
type undeleteResult struct {
	Applied      bool                `json:"applied"`
	Bytes        int64               `json:"bytes"`
	Changed      []string            `json:"changed"`
	Revision     int64               `json:"revision"`
	Same         []string            `json:"same"`
	SubPrefixes  []history.SubPrefix `json:"sub_prefixes"`
	WithoutLease []string            `json:"without_lease"`
	Written      []string            `json:"written"`
}
