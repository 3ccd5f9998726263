package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/etcdkit/etcdkit/store"
)

// ErrConflict: the store holds another object under the name a snapshot
// or record was to take. Objects are written once, so another writer got
// there first: two uploaders on one prefix.
var ErrConflict = errors.New("another writer wrote this object first: two uploaders on one prefix (another sidecar beside this cluster's leader, or another cluster pointed at this prefix)")

// put streams what write produces, encoded by c, into the object key. The
// store sees an error when write fails, so a failed snapshot never becomes
// visible. An object already there with the same bytes is an earlier
// attempt of this write that landed (a retry after a lost answer): no
// error; with other bytes, ErrConflict.
func put(ctx context.Context, st store.Store, key string, c Codec, how encoding, write func(io.Writer) error) (int64, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		enc, err := c.encoder(pw, how)
		if err == nil {
			err = write(enc)
			err = errors.Join(err, enc.Close())
		}
		pw.CloseWithError(err)
		done <- err
	}()
	counted := &countingReader{r: pr, h: crc32.New(castagnoli)}
	err := st.Put(ctx, key, counted)
	// A store that gave up early leaves the writer blocked on the pipe.
	pr.CloseWithError(errors.New("store stopped reading"))
	werr := <-done
	if errors.Is(err, store.ErrExists) && werr == nil {
		err = sameObject(ctx, st, key, counted.n, counted.h.Sum(nil), err)
	} else if errors.Is(err, store.ErrExists) {
		err = fmt.Errorf("%w: %w", ErrConflict, err)
	}
	if err == nil {
		err = werr
	}
	if err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", key, err)
	}
	return counted.n, nil
}

// castagnoli is the CRC-32C table: in hardware on the machines etcd runs
// on, so comparing what was written costs nothing next to compressing it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sameObject says whether the object key, which Put found there, holds
// size bytes whose CRC-32C is sum: nil when it does, else ErrConflict
// wrapping exists. It tells an earlier attempt of the same write from
// another writer's object, not bytes made to collide.
func sameObject(ctx context.Context, st store.Store, key string, size int64, sum []byte, exists error) error {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: %w (and reading it back: %w)", ErrConflict, exists, err)
	}
	defer func() { _ = rc.Close() }()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, rc)
	if err != nil {
		return fmt.Errorf("%w: %w (and reading it back: %w)", ErrConflict, exists, err)
	}
	if n != size || !bytes.Equal(h.Sum(nil), sum) {
		return fmt.Errorf("%w: %w", ErrConflict, exists)
	}
	return nil
}

// countingReader counts the bytes the store read, the object's size, and
// hashes them.
type countingReader struct {
	r io.Reader
	n int64
	h hash.Hash
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	return n, err
}

// writeDelta writes events as etcd-backup-restore does: the JSON array
// json.Marshal makes of them, then the raw SHA-256 of those JSON bytes.
// The JSON is written by hand into one reused buffer: encoding/json's
// reflection allocated three times each event's size per flush, garbage
// that sat beside the next batch of events. TestDeltaBytesMatchEtcdBackupRestore
// holds it to json.Marshal's bytes. last is applied to a copy of the
// last event.
func writeDelta(w io.Writer, events []Event, last Annotations) error {
	h := sha256.New()
	out := io.MultiWriter(w, h)
	buf := make([]byte, 0, 64<<10)
	buf = append(buf, '[')
	for i, ev := range events {
		if i > 0 {
			buf = append(buf, ',')
		}
		if i == len(events)-1 {
			last.Apply(&ev)
		}
		var err error
		if buf, err = appendEvent(buf, ev); err != nil {
			return fmt.Errorf("encode event at revision %d: %w", ev.Revision(), err)
		}
		if len(buf) >= 32<<10 {
			if _, err := out.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, ']')
	if _, err := out.Write(buf); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

// appendEvent appends what json.Marshal makes of ev: the struct tags of
// WatchEvent (every field omitempty), []byte as standard base64, the event
// type as its number, the time as RFC 3339 with nanoseconds.
func appendEvent(b []byte, ev Event) ([]byte, error) {
	b = append(b, `{"etcdEvent":`...)
	if e := ev.EtcdEvent; e == nil {
		b = append(b, "null"...)
	} else {
		o := jsonObject{b: append(b, '{')}
		o.int("type", int64(e.Type))
		if e.Kv != nil {
			o.field("kv")
			o.b = appendKeyValue(o.b, e.Kv)
		}
		if e.PrevKv != nil {
			o.field("prev_kv")
			o.b = appendKeyValue(o.b, e.PrevKv)
		}
		b = append(o.b, '}')
	}
	b = append(b, `,"time":`...)
	t, err := ev.Time.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b = append(b, t...)
	if ev.LeaseTTL != 0 {
		b = append(b, `,"leaseTTL":`...)
		b = strconv.AppendInt(b, ev.LeaseTTL, 10)
	}
	if len(ev.RevokedLeases) > 0 {
		b = append(b, `,"revokedLeases":[`...)
		for i, id := range ev.RevokedLeases {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
		}
		b = append(b, ']')
	}
	if ev.Auth != nil {
		// Rare enough for encoding/json.
		auth, err := json.Marshal(ev.Auth)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"auth":`...)
		b = append(b, auth...)
	}
	return append(b, '}'), nil
}

func appendKeyValue(b []byte, kv *KeyValue) []byte {
	o := jsonObject{b: append(b, '{')}
	o.bytes("key", kv.Key)
	o.int("create_revision", kv.CreateRevision)
	o.int("mod_revision", kv.ModRevision)
	o.int("version", kv.Version)
	o.bytes("value", kv.Value)
	o.int("lease", kv.Lease)
	return append(o.b, '}')
}

// jsonObject appends the fields of one JSON object, leaving out zero
// values as omitempty does.
type jsonObject struct {
	b    []byte
	more bool
}

func (o *jsonObject) field(name string) {
	if o.more {
		o.b = append(o.b, ',')
	}
	o.more = true
	o.b = append(o.b, '"')
	o.b = append(o.b, name...)
	o.b = append(o.b, `":`...)
}

func (o *jsonObject) int(name string, v int64) {
	if v != 0 {
		o.field(name)
		o.b = strconv.AppendInt(o.b, v, 10)
	}
}

func (o *jsonObject) bytes(name string, v []byte) {
	if len(v) > 0 {
		o.field(name)
		o.b = append(o.b, '"')
		o.b = base64.StdEncoding.AppendEncode(o.b, v)
		o.b = append(o.b, '"')
	}
}
