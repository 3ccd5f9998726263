package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/history"
)

// summary is --summary and --depth: a tenant admin's counts and sizes by
// sub-prefix instead of every key.
type summary struct {
	on    bool
	depth int
}

func (s *summary) flags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&s.on, "summary", false, "print the keys' counts and sizes by sub-prefix instead of every key (-o json has both)")
	cmd.Flags().IntVar(&s.depth, "depth", 1, "with --summary and in -o json: how many segments after the prefix a sub-prefix has (/registry/ at 1: /registry/pods/)")
}

func (s *summary) check() error { return cli.AtLeast("depth", int64(s.depth), 1) }

// printSubPrefixes is get's table of a state's sub-prefixes.
func printSubPrefixes(w *tabwriter.Writer, subs []history.SubPrefix) {
	fmt.Fprintf(w, "SUB-PREFIX\tKEYS\tSIZE\n")
	for _, s := range subs {
		fmt.Fprintf(w, "%s\t%d\t%s\n", s.Prefix, s.Keys, size(s.Bytes))
	}
}

// printDiffSubPrefixes is diff's table of sub-prefixes.
func printDiffSubPrefixes(w *tabwriter.Writer, subs []history.SubPrefix) {
	fmt.Fprintf(w, "SUB-PREFIX\tCREATED\tDELETED\tCHANGED\tKEYS\tSIZE\n")
	for _, s := range subs {
		fmt.Fprintf(w, "%s\t+%d\t-%d\t~%d\t%d\t%s → %s\n", s.Prefix, s.Created, s.Deleted, s.Changed, s.Keys, size(s.BytesBefore), size(s.Bytes))
	}
}

// totalBytes is the bytes of the keys and values of subs.
func totalBytes(subs []history.SubPrefix) (n int64) {
	for _, s := range subs {
		n += s.Bytes
	}
	return n
}
