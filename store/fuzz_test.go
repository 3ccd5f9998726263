package store

import (
	"net/url"
	"testing"
)

// Store URLs come from flags, environment variables and configuration
// files: parsing one never panics, and a location that parses prints as
// a URL that parses back to itself.
func FuzzURL(f *testing.F) {
	for _, s := range []string{
		"file:///var/backups/etcd", "relative/dir", "mem://", "s3://bucket/prefix?region=eu-west-1&path-style=true",
		"gs://b/p/q?endpoint=http://127.0.0.1:4443", "azblob://c/p?account=a&endpoint=http://x/devstoreaccount1",
		"s3:///nobucket", "s3://b/../up", "s3://b/p%2F..%2Fx", "s3://b?path-style=maybe",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := parseURL(raw)
		if err != nil {
			return
		}
		loc, q, err := ParseLocation(u, "bucket")
		if err != nil {
			return
		}
		_, _ = q.Bool("path-style")
		_ = q.Get("region")
		_ = q.Unused()
		back, err := url.Parse(loc.String())
		if err != nil {
			t.Fatalf("%q parses to %v, which prints as %q, which does not parse: %v", raw, loc, loc.String(), err)
		}
		again, _, err := ParseLocation(back, "bucket")
		if err != nil || again != loc {
			t.Fatalf("%q: %+v prints as %q, which parses to %+v (%v)", raw, loc, loc.String(), again, err)
		}
	})
}
