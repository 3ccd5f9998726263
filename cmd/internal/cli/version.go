package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/internal/buildinfo"
)

// Version is the version command of a binary: its build, as text or,
// when output says json, as one JSON object. A nil output gives the
// command -o/--output (and etcdctl's -w/--write-out) of its own.
func Version(output *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, and Go and etcd versions this binary was built with",
		Args:  cobra.NoArgs,
	}
	if output == nil {
		output = new(string)
		cmd.Flags().StringVarP(output, "output", "o", "table", "output: table or json")
		Alias(cmd.Flags(), "output", "write-out", "w", "etcdctl")
		Outputs(cmd)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch *output {
		case "table", "":
			return printVersion(cmd.OutOrStdout(), cmd.Root().Name(), false)
		case "json":
			return printVersion(cmd.OutOrStdout(), cmd.Root().Name(), true)
		}
		return Usage(fmt.Errorf("--output %q: table or json", *output))
	}
	return cmd
}

func printVersion(w io.Writer, name string, asJSON bool) error {
	b := buildinfo.Read()
	if asJSON {
		return json.NewEncoder(w).Encode(b)
	}
	commit := b.Commit
	if commit == "" {
		commit = "(not recorded)"
	}
	_, err := fmt.Fprintf(w, "%s %s\ncommit %s %s\ngo %s\netcd %s\n", name, b.Version, commit, b.Built, b.Go, b.Etcd)
	return err
}
