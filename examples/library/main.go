package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	_ "github.com/etcdkit/etcdkit/store/s3" // s3:// URLs; gcs and azure register the same way
)

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:2379", "etcd client URLs, comma-separated")
	storeURL := flag.String("store", "", "where the backup goes: file:///path, s3://bucket/prefix, …")
	dataDir := flag.String("data-dir", "", "the data dir to restore into")
	flag.Parse()
	if err := run(*endpoints, *storeURL, *dataDir); err != nil {
		fmt.Fprintln(os.Stderr, "library:", err)
		os.Exit(1)
	}
}

func run(endpoints, storeURL, dataDir string) error {
	ctx := context.Background()
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: strings.Split(endpoints, ",")})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()

	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("backed up revision %d to %s\n", full.LastRevision, full.Key)

	res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dataDir}})
	if err != nil {
		return err
	}
	fmt.Printf("restored revision %d into %s\n", res.Revision, dataDir)
	return nil
}
