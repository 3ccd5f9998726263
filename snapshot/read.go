package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/etcdkit/etcdkit/internal/frames"
	"github.com/etcdkit/etcdkit/store"
)

// Event is one entry of a delta snapshot, in etcd-backup-restore's shape:
// the watch event as etcd's protobuf struct marshals to JSON (key and value
// base64, type 1 for DELETE, omitted when 0 for PUT) and when the watcher
// received it. The fields after those two are etcdkit's: what a restore
// needs beyond the watch stream. etcd-backup-restore's decoder ignores
// fields it does not declare, so its restores read these deltas as before.
// LeaseGone is Event.LeaseTTL for a lease etcd no longer held when the
// capture asked for its TTL.
const LeaseGone = -1

type Event struct {
	EtcdEvent *WatchEvent `json:"etcdEvent"`
	Time      time.Time   `json:"time"`
	// LeaseTTL is the granted TTL, in seconds, of the lease of
	// EtcdEvent.Kv, on the first event of a lease the capture had not
	// recorded: the watch says which lease a key has, never how long it
	// lives, and a restore grants the lease again with it. LeaseGone
	// (-1) says the lease had expired or been revoked when the capture
	// asked (its keys' deletions follow in the stream): a restore to a
	// revision between them grants it the shortest TTL, so the keys go
	// soon after the member starts, as they went then.
	LeaseTTL int64 `json:"leaseTTL,omitempty"`
	// RevokedLeases are leases recorded before that the cluster no longer
	// held when this event's delta was written.
	RevokedLeases []int64 `json:"revokedLeases,omitempty"`
	// Auth is the users and roles, on the last event of a delta written
	// after they changed.
	Auth *Auth `json:"auth,omitempty"`
}

// Revision is the revision the event belongs to.
func (e Event) Revision() int64 {
	if e.EtcdEvent == nil || e.EtcdEvent.Kv == nil {
		return 0
	}
	return e.EtcdEvent.Kv.ModRevision
}

// Open returns a snapshot's payload: the bbolt database of a full snapshot
// or the JSON of a delta, decrypted and decompressed, without its trailer.
// The reader ends in io.EOF only when the trailer matched what was read;
// any damage ends it in an error that names the object. A caller must not
// trust what it read before that end.
func Open(ctx context.Context, st store.Store, s Snapshot, c Codec) (io.ReadCloser, error) {
	payload, err := open(ctx, st, s, c)
	if err != nil {
		return nil, err
	}
	return &named{ReadCloser: payload, name: s.Key}, nil
}

func open(ctx context.Context, st store.Store, s Snapshot, c Codec) (io.ReadCloser, error) {
	obj, err := st.Get(ctx, s.Key)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.Key, err)
	}
	dec, err := c.decoder(obj, s)
	if err != nil {
		_ = obj.Close()
		return nil, fmt.Errorf("snapshot %s: %w", s.Key, err)
	}
	if _, ahead := dec.(*frames.Reader); ahead || s.Compression == None && !s.Encrypted {
		// Closing the object first ends a read the frames reader may be
		// blocked in.
		return &closers{Reader: newVerifier(dec), closers: []io.Closer{obj, dec}}, nil
	}
	ra := newReadAhead(dec)
	// Closing the object ends a read the goroutine may be blocked in.
	return &closers{Reader: newVerifier(ra), closers: []io.Closer{closerFunc(ra.halt), obj, closerFunc(ra.wait), dec}}, nil
}

// DeltaReader decodes the events of a delta snapshot one at a time, so a
// delta of any size is read in constant memory (one event at a time, in a
// buffer that grows to the largest event).
type DeltaReader struct {
	payload io.ReadCloser
	in      *bufio.Reader
	name    string
	started bool
	ended   bool
	last    int64
	elem    []byte
}

// OpenDelta opens a delta snapshot for reading its events.
func OpenDelta(ctx context.Context, st store.Store, s Snapshot, c Codec) (*DeltaReader, error) {
	if s.Kind != KindDelta {
		return nil, fmt.Errorf("snapshot %s: is a %s snapshot, not a delta", s.Key, s.Kind)
	}
	payload, err := open(ctx, st, s, c)
	if err != nil {
		return nil, err
	}
	return newDeltaReader(payload, s.Key), nil
}

// newDeltaReader decodes events from a delta's payload, such as one Open
// returned or a local copy of it. name appears in errors.
func newDeltaReader(payload io.ReadCloser, name string) *DeltaReader {
	return &DeltaReader{payload: payload, in: bufio.NewReaderSize(payload, 256<<10), name: name}
}

// Next returns the next event, in revision order. It returns io.EOF after
// the last one, once the object's trailer was verified.
//
// The array is split into its elements by a scanner of its own, which
// only follows strings and nesting; each element is then parsed by
// fastEvent or, in any other form, by encoding/json, which checks its
// syntax. encoding/json's Decoder would scan every byte a second time.
func (d *DeltaReader) Next() (Event, error) {
	if d.ended {
		return Event{}, io.EOF
	}
	if !d.started {
		if err := d.expect('['); err != nil {
			return Event{}, err
		}
		d.started = true
		c, err := d.peek()
		if err != nil {
			return Event{}, d.fail(err)
		}
		if c == ']' {
			_, _ = d.in.ReadByte()
			return Event{}, d.end()
		}
	}
	raw, err := d.element()
	if err != nil {
		return Event{}, d.fail(err)
	}
	ev, ok := fastEvent(raw)
	if !ok {
		if err := json.Unmarshal(raw, &ev); err != nil {
			return Event{}, d.fail(err)
		}
	}
	if ev.EtcdEvent == nil || ev.EtcdEvent.Kv == nil {
		return Event{}, d.fail(errors.New("an event has no etcdEvent.kv"))
	}
	if rev := ev.Revision(); rev < d.last {
		return Event{}, d.fail(fmt.Errorf("revision %d follows revision %d", rev, d.last))
	}
	d.last = ev.Revision()
	// What follows an element: a comma and another, or the array's end.
	c, err := d.peek()
	if err != nil {
		return Event{}, d.fail(err)
	}
	switch c {
	case ',':
		_, _ = d.in.ReadByte()
	case ']':
		_, _ = d.in.ReadByte()
		if err := d.end(); !errors.Is(err, io.EOF) {
			return Event{}, err
		}
		d.ended = true
	default:
		return Event{}, d.fail(fmt.Errorf("want ',' or ']' after an event, found %q", c))
	}
	return ev, nil
}

// peek returns the next byte that is not whitespace, without consuming it.
func (d *DeltaReader) peek() (byte, error) {
	for {
		c, err := d.in.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if !isSpace(c) {
			return c, d.in.UnreadByte()
		}
	}
}

func (d *DeltaReader) expect(want byte) error {
	c, err := d.peek()
	if err != nil {
		return d.fail(err)
	}
	if c != want {
		return d.fail(fmt.Errorf("want %q, found %q", want, c))
	}
	_, _ = d.in.ReadByte()
	return nil
}

// element reads one object of the array, from its '{' to the matching
// '}', following strings and their escapes so that braces inside them do
// not count. It returns a buffer that the next call reuses.
func (d *DeltaReader) element() ([]byte, error) {
	c, err := d.peek()
	if err != nil {
		return nil, err
	}
	if c != '{' {
		return nil, fmt.Errorf("want an event object, found %q", c)
	}
	d.elem = d.elem[:0]
	depth, inString, escaped := 0, false, false
	for {
		chunk, err := d.in.Peek(max(1, d.in.Buffered()))
		if len(chunk) == 0 {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		for i := 0; i < len(chunk); i++ {
			c := chunk[i]
			switch {
			case escaped:
				escaped = false
			case inString:
				// Jump to the string's end or its next escape: values are
				// long base64 strings.
				rest := chunk[i:]
				end := bytes.IndexByte(rest, '"')
				if end < 0 {
					end = len(rest)
				}
				if esc := bytes.IndexByte(rest[:end], '\\'); esc >= 0 {
					i += esc
					escaped = true
				} else if i += end; end < len(rest) {
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
				if depth == 0 {
					d.elem = append(d.elem, chunk[:i+1]...)
					_, _ = d.in.Discard(i + 1)
					return d.elem, nil
				}
			}
		}
		d.elem = append(d.elem, chunk...)
		_, _ = d.in.Discard(len(chunk))
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// end reads past the JSON so the verifier checks the trailer; only
// whitespace may follow the array.
func (d *DeltaReader) end() error {
	rest, err := io.ReadAll(d.in)
	if err != nil {
		return d.fail(err)
	}
	for _, b := range rest {
		if !isSpace(b) {
			return d.fail(errors.New("data after the event array"))
		}
	}
	d.ended = true
	return io.EOF
}

// fail names the object in a decoding error. A damaged trailer explains
// most decoding errors, so the trailer's verdict wins when the rest of the
// payload shows it.
func (d *DeltaReader) fail(err error) error {
	if _, rerr := io.Copy(io.Discard, d.payload); rerr != nil {
		err = rerr
	}
	return fmt.Errorf("snapshot %s: decode delta: %w", d.name, err)
}

// Close releases the object.
func (d *DeltaReader) Close() error { return d.payload.Close() }
