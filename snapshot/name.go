package snapshot

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

// Kind is what a snapshot object holds. The values are the name prefixes
// etcd-backup-restore writes, so both tools read each other's objects.
type Kind string

const (
	// KindFull is a whole bbolt database with etcd's SHA-256 trailer.
	KindFull Kind = "Full"
	// KindDelta is a JSON array of watch events with a SHA-256 trailer.
	KindDelta Kind = "Incr"
)

// Layout directories. v2 is the only one written; v1 (one directory per
// full snapshot) is read so old backups stay restorable.
const (
	dirV2 = "v2"
	dirV1 = "v1"
)

const (
	suffixAge   = ".age"
	suffixFinal = ".final"
)

// ErrBadName reports an object under v1/ or v2/ whose name is not a snapshot
// name. List skips such objects; Parse returns the error.
var ErrBadName = errors.New("not a snapshot name")

// Snapshot describes one snapshot object on a store. Everything but Size is
// encoded in the object's name.
type Snapshot struct {
	Kind Kind
	// StartRevision is 0 for a full snapshot (as etcd-backup-restore writes
	// it) and the first revision a delta may hold: the previous snapshot's
	// LastRevision+1.
	StartRevision int64
	// LastRevision is the newest revision the snapshot holds.
	LastRevision int64
	// Created has one-second precision: the name stores unix seconds.
	Created     time.Time
	Compression Compression
	Encrypted   bool
	// Final marks the snapshot etcd-backup-restore takes when it stops for
	// good; it is an ordinary snapshot otherwise.
	Final bool
	// Key is the object's key in its store.
	Key string
	// Size is the object's size in bytes, known only for listed objects.
	Size int64
	// Timeline is the timeline the object belongs to, known only for
	// listed objects.
	Timeline string
}

// Name is the object's base name: Kind-start-last-unix and its suffixes.
func (s Snapshot) Name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s-%08d-%08d-%d%s", s.Kind, s.StartRevision, s.LastRevision, s.Created.Unix(), s.Compression.Suffix())
	if s.Encrypted {
		b.WriteString(suffixAge)
	}
	if s.Final {
		b.WriteString(suffixFinal)
	}
	return b.String()
}

// String names the snapshot for logs and errors.
func (s Snapshot) String() string {
	if s.Key != "" {
		return s.Key
	}
	return s.Name()
}

// Legacy reports whether the object is in the read-only v1 layout.
func (s Snapshot) Legacy() bool { return strings.HasPrefix(s.Key, dirV1+"/") }

// newSnapshot fills in the v2 key of a snapshot about to be written.
func newSnapshot(kind Kind, start, last int64, created time.Time, c Codec, final bool) Snapshot {
	s := Snapshot{
		Kind:          kind,
		StartRevision: start,
		LastRevision:  last,
		Created:       time.Unix(created.Unix(), 0).UTC(),
		Compression:   c.Compression,
		Encrypted:     c.encrypts(),
		Final:         final,
	}
	s.Key = dirV2 + "/" + s.Name()
	return s
}

// Parse reads a snapshot from its key in a store: v2/<name> or
// v1/Backup-<unix>/<name>. Chunk objects of the old chunked uploads
// (one more path level) are not snapshots.
func Parse(key string) (Snapshot, error) {
	parts := strings.Split(key, "/")
	switch {
	case len(parts) == 2 && parts[0] == dirV2:
	case len(parts) == 3 && parts[0] == dirV1 && strings.HasPrefix(parts[1], "Backup-"):
	default:
		return Snapshot{}, fmt.Errorf("snapshot %q: %w: want v2/<name> or v1/Backup-<unix>/<name>", key, ErrBadName)
	}
	s, err := parseName(path.Base(key))
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %q: %w", key, err)
	}
	s.Key = key
	return s, nil
}

func parseName(name string) (Snapshot, error) {
	tokens := strings.SplitN(name, "-", 4)
	if len(tokens) != 4 {
		return Snapshot{}, fmt.Errorf("%w: want Full|Incr-<start>-<last>-<unix>[suffixes]", ErrBadName)
	}
	var s Snapshot
	switch Kind(tokens[0]) {
	case KindFull, KindDelta:
		s.Kind = Kind(tokens[0])
	default:
		return Snapshot{}, fmt.Errorf("%w: kind %q is neither Full nor Incr", ErrBadName, tokens[0])
	}
	var err error
	if s.StartRevision, err = parseRevision(tokens[1]); err != nil {
		return Snapshot{}, fmt.Errorf("%w: start revision: %w", ErrBadName, err)
	}
	if s.LastRevision, err = parseRevision(tokens[2]); err != nil {
		return Snapshot{}, fmt.Errorf("%w: last revision: %w", ErrBadName, err)
	}
	if s.StartRevision > s.LastRevision {
		return Snapshot{}, fmt.Errorf("%w: start revision %d is after last revision %d", ErrBadName, s.StartRevision, s.LastRevision)
	}
	unix, suffixes, _ := strings.Cut(tokens[3], ".")
	sec, err := parseRevision(unix)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: creation time: %w", ErrBadName, err)
	}
	s.Created = time.Unix(sec, 0).UTC()
	if suffixes != "" {
		if err := s.parseSuffixes("." + suffixes); err != nil {
			return Snapshot{}, err
		}
	}
	return s, nil
}

// parseSuffixes accepts the suffixes in their only order: compression,
// encryption, final.
func (s *Snapshot) parseSuffixes(rest string) error {
	for _, c := range compressions {
		if c.Suffix() != "" && strings.HasPrefix(rest, c.Suffix()) {
			s.Compression = c
			rest = rest[len(c.Suffix()):]
			break
		}
	}
	if r, ok := strings.CutPrefix(rest, suffixAge); ok {
		s.Encrypted, rest = true, r
	}
	if r, ok := strings.CutPrefix(rest, suffixFinal); ok {
		s.Final, rest = true, r
	}
	if rest != "" {
		return fmt.Errorf("%w: unknown suffix %q (known, in this order: .gz|.zlib|.Z|.zst, .age, .final)", ErrBadName, rest)
	}
	return nil
}

// parseRevision accepts only decimal digits: ParseInt alone would take a
// sign, and "+5" is no name etcd-backup-restore writes.
func parseRevision(s string) (int64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	return strconv.ParseInt(s, 10, 64)
}
