package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Man is the hidden command that writes a binary's man pages, one per
// command (etcd-backup.1, etcd-backup-restore.1, …), into a directory:
// the release procedure ships them. Hidden: an operator reads --help.
func Man() *cobra.Command {
	return &cobra.Command{
		Use:    "man DIR",
		Short:  "Write the man pages of every command into DIR",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			// Each page titled by its command; dated by SOURCE_DATE_EPOCH
			// when set, so a release's pages are the same on every build.
			header := &doc.GenManHeader{Section: "1", Source: "etcdkit", Manual: "etcdkit"}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("man pages in %s: %w", args[0], err)
			}
			return nil
		},
	}
}

// Outputs completes cmd's --output and its etcdctl name with the
// formats.
func Outputs(cmd *cobra.Command) {
	for _, name := range []string{"output", "write-out"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	}
}
