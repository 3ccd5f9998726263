package cli

import (
	"fmt"
	"os"
	"strings"

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
			// The pages are written from markdown, where two underscores
			// in a paragraph (ETCDKIT_<FLAG> … ETCDCTL_<FLAG>) make the text
			// between them italic, and <FLAG> is a tag that vanishes; this
			// process only writes the pages, so the help texts are escaped
			// in place.
			escape(root)
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

// escape makes cmd's and its commands' underscores and angle brackets
// literal in markdown.
func escape(cmd *cobra.Command) {
	r := strings.NewReplacer("_", `\_`, "<", `\<`)
	cmd.Long, cmd.Short = r.Replace(cmd.Long), r.Replace(cmd.Short)
	for _, c := range cmd.Commands() {
		escape(c)
	}
}

// Outputs completes cmd's --output and its etcdctl name with the
// formats.
func Outputs(cmd *cobra.Command) {
	for _, name := range []string{"output", "write-out"} {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	}
}
