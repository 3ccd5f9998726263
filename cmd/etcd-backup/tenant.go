package main

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/tenant"
)

// tenant is restore's --prefix, --to, --apply, --replace and --rename: one
// prefix's keys restored into a data dir of their own or a live cluster.
type tenantFlags struct {
	prefix, renameFlag string
	rename             restore.Rename
	to                 []string
	apply, replace     bool
	work               string
	toSource           string
}

// flags are restore's: a dry run unless --apply.
func (tn *tenantFlags) flags(cmd *cobra.Command) {
	tn.keyFlags(cmd)
	f := cmd.Flags()
	f.BoolVar(&tn.apply, "apply", false, "with --to: write; without it, only report what would be written")
	f.BoolVar(&tn.replace, "replace", false, "with --to: also delete the live keys under the prefix that the past did not hold")
	f.StringVar(&tn.toSource, "to-source", "etcd", "with --to: what it reaches: etcd, or etcd-api (a datastore behind etcd's API such as kine: each key is written in a Txn of its own, and without --prefix the whole keyspace is restored)")
}

// keyFlags pick the keys and where they go, for restore and move.
func (tn *tenantFlags) keyFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&tn.prefix, "prefix", "", "only the keys under this prefix (a tenant's)")
	f.StringSliceVar(&tn.to, "to", nil, "with --prefix: write the keys into this live cluster (client URLs; the TLS and auth flags apply) instead of a data dir")
	f.StringVar(&tn.renameFlag, "rename", "", "with --prefix: write the keys under another prefix, given as FROM=TO (FROM begins the --prefix)")
	f.StringVar(&tn.work, "scratch-dir", "", "with --to: where the chain is replayed (default: the system's temporary directory)")
}

// check refuses the flags that do not go together.
func (tn *tenantFlags) check(cmd *cobra.Command, dataDir string, follow bool) error {
	changed := cmd.Flags().Changed
	kind, err := snapshot.ParseSourceKind(tn.toSource)
	if err != nil {
		return cli.Usage(fmt.Errorf("--to-source: %w", err))
	}
	switch {
	case changed("to-source") && len(tn.to) == 0:
		return cli.Usage(errors.New("--to-source goes with --to: it says what the live endpoints are"))
	case len(tn.to) > 0 && tn.prefix == "" && kind == snapshot.SourceEtcd:
		return cli.Usage(errors.New("--to writes one prefix's keys into a live cluster: give --prefix (a whole cluster is restored into a --data-dir)"))
	case len(tn.to) > 0 && dataDir != "":
		return cli.Usage(errors.New("--to and --data-dir exclude each other: a tenant's keys go into a live cluster or into a data dir of their own"))
	case follow && tn.prefix != "":
		return cli.Usage(errors.New("--follow keeps a whole cluster's standby: it takes no --prefix"))
	case len(tn.to) == 0 && (changed("apply") || changed("replace") || changed("scratch-dir")):
		return cli.Usage(errors.New("--apply, --replace and --scratch-dir go with --to: a data dir is always written whole"))
	case tn.renameFlag != "" && tn.prefix == "":
		return cli.Usage(errors.New("--rename needs --prefix: the keys to rename"))
	}
	if tn.renameFlag != "" {
		if tn.rename, err = restore.ParseRename(tn.renameFlag); err != nil {
			return cli.Usage(err)
		}
		if err := tn.rename.Check(tn.prefix); err != nil {
			return cli.Usage(err)
		}
	}
	return nil
}

// run reads the prefix's past state from the backups and applies it to
// the cluster at --to.
func (tn *tenantFlags) run(cmd *cobra.Command, g *globals, t target) error {
	ctx := cmd.Context()
	opts := history.StateOptions{WorkDir: tn.work, Keys: history.Keys{Key: tn.prefix, Prefix: true}}
	var err error
	if opts.Read.Target, err = t.target(cmd); err != nil {
		return err
	}
	// A tenant's user may read and write its prefix alone: no root role.
	conn := g.etcd.Config().With(cli.Schemes(tn.to, g.secure())...)
	conn.Logger = g.log
	live, err := etcdclient.New(ctx, conn)
	if err != nil {
		return err
	}
	defer func() { _ = live.Close() }()
	past, err := g.readState(ctx, opts)
	if err != nil {
		return err
	}
	a, err := tenant.ApplyState(ctx, live, past, tn.prefix, tenant.ApplyOptions{Apply: tn.apply, Replace: tn.replace, Rename: tn.rename,
		KeyByKey: tn.toSource == string(snapshot.SourceEtcdAPI)})
	if err != nil {
		return err
	}
	subs := history.Summarize(tn.prefix, 1, past.KVs)
	bytes := totalBytes(subs)
	written := tn.rename.Of(tn.prefix)
	out := tenantResult{Applied: tn.apply, Bytes: bytes, Conflicts: nonNil(a.Conflicts), Created: nonNil(a.Created), Deleted: nonNil(a.Deleted),
		Extra: nonNil(a.Extra), Keys: len(past.KVs), Leases: a.Leases, LiveRevision: a.Revision, Overwritten: nonNil(a.Overwritten),
		Prefix: tn.prefix, Replace: tn.replace, Revision: past.Revision, Same: nonNil(a.Same), SubPrefixes: subPrefixes(subs),
		WithoutLease: nonNil(a.WithoutLease), WrittenUnder: written}
	return g.print(out, func(w *tabwriter.Writer) {
		if !tn.apply {
			fmt.Fprintf(w, "dry run: nothing was written; run again with --apply\n")
		}
		under := func(p string) string {
			if p == "" {
				return "in the whole keyspace"
			}
			return "under " + p
		}
		fmt.Fprintf(w, "past state\trevision %d, %d keys (%s) %s\n", past.Revision, len(past.KVs), size(bytes), under(tn.prefix))
		fmt.Fprintf(w, "live cluster\trevision %d, keys %s\n", a.Revision, under(written))
		verb := func(done, todo string) string {
			if tn.apply {
				return done
			}
			return todo
		}
		rows := []struct {
			name string
			keys []string
		}{
			{verb("created", "to create"), a.Created},
			{verb("overwritten", "to overwrite"), a.Overwritten},
			{"already as then", a.Same},
			{verb("deleted", "to delete"), a.Deleted},
			{"not in the past, left (--replace deletes them)", a.Extra},
			{"changed by another writer meanwhile, left", a.Conflicts},
			{"written without their lease (no TTL recorded)", a.WithoutLease},
		}
		for _, r := range rows {
			if len(r.keys) > 0 || r.name == "already as then" {
				fmt.Fprintf(w, "%s\t%d\t%s\n", r.name, len(r.keys), keyList(r.keys))
			}
		}
		if a.Leases > 0 {
			fmt.Fprintf(w, "%s\t%d (the TTLs they were granted)\n", verb("leases granted", "leases to grant"), a.Leases)
		}
	})
}

// keyList shows the first keys of a list; -o json has them all.
func keyList(keys []string) string {
	const shown = 10
	if len(keys) <= shown {
		return strings.Join(keys, " ")
	}
	return fmt.Sprintf("%s … and %d more (-o json lists every key)", strings.Join(keys[:shown], " "), len(keys)-shown)
}

// tenantResult is what restore --prefix --to prints.
type tenantResult struct {
	Applied      bool                `json:"applied"`
	Bytes        int64               `json:"bytes"`
	Conflicts    []string            `json:"conflicts"`
	Created      []string            `json:"created"`
	Deleted      []string            `json:"deleted"`
	Extra        []string            `json:"extra"`
	Keys         int                 `json:"keys"`
	Leases       int                 `json:"leases"`
	LiveRevision int64               `json:"live_revision"`
	Overwritten  []string            `json:"overwritten"`
	Prefix       string              `json:"prefix"`
	Replace      bool                `json:"replace"`
	Revision     int64               `json:"revision"`
	Same         []string            `json:"same"`
	SubPrefixes  []history.SubPrefix `json:"sub_prefixes"`
	WithoutLease []string            `json:"without_lease"`
	WrittenUnder string              `json:"written_under"`
}
