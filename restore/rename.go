package restore

import (
	"bytes"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Rename rewrites a key prefix: each key under From is written under To
// instead (a tenant restored under another name). The zero value keeps
// every key as it is.
type Rename struct {
	From, To string
}

// ParseRename reads a rename given as FROM=TO.
func ParseRename(s string) (Rename, error) {
	from, to, ok := strings.Cut(s, "=")
	if !ok || from == "" || to == "" {
		return Rename{}, fmt.Errorf("rename %q: give it as FROM=TO, two non-empty prefixes", s)
	}
	if strings.HasSuffix(from, "/") != strings.HasSuffix(to, "/") {
		return Rename{}, fmt.Errorf("rename %q: end both prefixes with a / or neither (a key /a/k would become %s)", s, to+"k")
	}
	return Rename{From: from, To: to}, nil
}

// Check says whether the rename applies to every key under prefix: the
// keys picked must all start with From, or some would keep their name.
func (r Rename) Check(prefix string) error {
	if r == (Rename{}) || strings.HasPrefix(prefix, r.From) {
		return nil
	}
	return fmt.Errorf("rename %s=%s: the prefix %q does not start with %q, so its keys would not all be renamed", r.From, r.To, prefix, r.From)
}

// Of is key renamed: under To when it is under From, else as it is.
func (r Rename) Of(key string) string { return string(r.key([]byte(key))) }

// key is k renamed.
func (r Rename) key(k []byte) []byte {
	if r == (Rename{}) || !bytes.HasPrefix(k, []byte(r.From)) {
		return k
	}
	return append([]byte(r.To), k[len(r.From):]...)
}

// rangeEnd is a permission's range end under the rename: the end of the
// renamed prefix for the end of From, the renamed key for a key under it.
func (r Rename) rangeEnd(end []byte) []byte {
	if r != (Rename{}) && string(end) == clientv3.GetPrefixRangeEnd(r.From) {
		return []byte(clientv3.GetPrefixRangeEnd(r.To))
	}
	return r.key(end)
}
