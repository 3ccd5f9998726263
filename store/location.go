package store

import (
	"fmt"
	"net/url"
	"strings"
)

// Location is where a cloud store keeps its objects: a bucket (or
// container) and a prefix inside it. Backends name objects through it so
// that key rules, prefixes and the store's name in messages are the same
// everywhere.
type Location struct {
	Scheme string
	Bucket string
	// Prefix has no leading or trailing slash; "" is the bucket's root.
	Prefix string
}

// NewLocation checks and cleans the parts of a location; kind names the
// bucket in messages ("bucket", "container").
func NewLocation(scheme, bucket, prefix, kind string) (Location, error) {
	l := Location{Scheme: scheme, Bucket: bucket}
	p, err := CleanPrefix(prefix)
	if err != nil {
		return l, BadURL(fmt.Errorf("store %s: %w", l, err))
	}
	l.Prefix = p
	if bucket == "" {
		return l, BadURL(fmt.Errorf("store %s: no %s: write %s://<%s>/<prefix>", l, kind, scheme, kind))
	}
	// No cloud names a bucket with these; here they are a mistyped URL (a
	// port, credentials, a stray slash), and the store's name in messages
	// must read back as the same URL.
	if strings.ContainsAny(bucket, ":/?#@%[] \t\r\n") {
		return l, BadURL(fmt.Errorf("store %s: %q is not a %s name", l, bucket, kind))
	}
	return l, nil
}

// ParseLocation reads the location of a cloud store URL and returns the
// options of its query.
func ParseLocation(u *url.URL, kind string) (Location, *Query, error) {
	if u.User != nil {
		return Location{Scheme: u.Scheme}, NewQuery(u), BadURL(fmt.Errorf("store %s://: credentials do not belong in the URL; use the backend's credential file or environment", u.Scheme))
	}
	l, err := NewLocation(u.Scheme, u.Host, u.Path, kind)
	return l, NewQuery(u), err
}

// String returns the location as a store URL without options.
func (l Location) String() string {
	s := l.Scheme + "://" + l.Bucket
	if l.Prefix != "" {
		s += "/" + escapePath(l.Prefix)
	}
	return s
}

// escapePath is how every store prints a path in its URL. Paths may hold
// '#', '?' or '%', and the URL printed in a message must parse back to the
// same store.
func escapePath(p string) string { return (&url.URL{Path: p}).EscapedPath() }

// Object returns the full object name of key, or an error wrapping
// ErrInvalidKey that names the store.
func (l Location) Object(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", fmt.Errorf("store %s: %w", l, err)
	}
	return JoinKey(l.Prefix, key), nil
}

// ListPrefix returns the full object-name prefix that lists the keys
// starting with prefix.
func (l Location) ListPrefix(prefix string) (string, error) {
	if err := CheckPrefix(prefix); err != nil {
		return "", fmt.Errorf("store %s: %w", l, err)
	}
	if l.Prefix == "" {
		return prefix, nil
	}
	return l.Prefix + "/" + prefix, nil
}

// Key returns the store key of a full object name found by a listing.
func (l Location) Key(name string) string {
	if l.Prefix == "" {
		return name
	}
	return strings.TrimPrefix(name, l.Prefix+"/")
}
