package history

import (
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// SubPrefix is a tenant admin's view of the keys under one sub-prefix: how
// many, how large, and in a diff how they changed.
type SubPrefix struct {
	Prefix string `json:"prefix"`
	// Keys and Bytes (keys and values) of a state; of a diff's later
	// state.
	Keys  int   `json:"keys"`
	Bytes int64 `json:"bytes"`
	// A diff's keys created, deleted and put again, and the bytes of the
	// earlier state.
	Created     int   `json:"created,omitempty"`
	Deleted     int   `json:"deleted,omitempty"`
	Changed     int   `json:"changed,omitempty"`
	BytesBefore int64 `json:"bytes_before,omitempty"`
}

// SubPrefixOf is the sub-prefix key falls under: prefix and the next depth
// segments of the key after it, each ending in '/' (Kubernetes' layout:
// /registry/pods/ns/name under /registry/ at depth 1 is /registry/pods/).
// A key with fewer segments left falls under the deepest one it has.
func SubPrefixOf(prefix string, depth int, key string) string {
	if !strings.HasPrefix(key, prefix) {
		return ""
	}
	end := len(prefix)
	for range max(depth, 1) {
		// A segment has one byte at least: prefix "/registry" puts
		// /registry/pods/x under /registry/pods/.
		if end >= len(key) {
			break
		}
		i := strings.IndexByte(key[end+1:], '/')
		if i < 0 {
			break
		}
		end += i + 2
	}
	return key[:end]
}

// Summarize counts the keys of kvs and their bytes by sub-prefix, in
// sub-prefix order.
func Summarize(prefix string, depth int, kvs []*mvccpb.KeyValue) []SubPrefix {
	return summarize(prefix, depth, func(add func(key string, f func(*SubPrefix))) {
		for _, kv := range kvs {
			add(string(kv.Key), func(s *SubPrefix) { s.Keys++; s.Bytes += kvBytes(kv) })
		}
	})
}

// SummarizeDiff counts a diff's changes by sub-prefix, and the bytes of
// both states there.
func SummarizeDiff(prefix string, depth int, a, b State) []SubPrefix {
	return summarize(prefix, depth, func(add func(key string, f func(*SubPrefix))) {
		for _, kv := range a.KVs {
			add(string(kv.Key), func(s *SubPrefix) { s.BytesBefore += kvBytes(kv) })
		}
		for _, kv := range b.KVs {
			add(string(kv.Key), func(s *SubPrefix) { s.Keys++; s.Bytes += kvBytes(kv) })
		}
		for _, ch := range Diff(a, b) {
			add(ch.Key, func(s *SubPrefix) {
				switch {
				case ch.From == nil:
					s.Created++
				case ch.To == nil:
					s.Deleted++
				default:
					s.Changed++
				}
			})
		}
	})
}

func summarize(prefix string, depth int, each func(add func(key string, f func(*SubPrefix)))) []SubPrefix {
	by := map[string]*SubPrefix{}
	each(func(key string, f func(*SubPrefix)) {
		p := SubPrefixOf(prefix, depth, key)
		s := by[p]
		if s == nil {
			s = &SubPrefix{Prefix: p}
			by[p] = s
		}
		f(s)
	})
	out := make([]SubPrefix, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y SubPrefix) int { return strings.Compare(x.Prefix, y.Prefix) })
	return out
}

func kvBytes(kv *mvccpb.KeyValue) int64 { return int64(len(kv.Key) + len(kv.Value)) }
