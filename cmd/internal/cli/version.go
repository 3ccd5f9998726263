package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/internal/buildinfo"
)

// Version is the version command of a binary: its build, as text or,
// when asJSON says so, as one JSON object.
func Version(asJSON func() bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, and Go and etcd versions this binary was built with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout(), cmd.Root().Name(), asJSON())
		},
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
