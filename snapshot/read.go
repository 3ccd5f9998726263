package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdkit/etcdkit/store"
)

// Event is one entry of a delta snapshot, in etcd-backup-restore's shape:
// the watch event as etcd's protobuf struct marshals to JSON (key and value
// base64, type 1 for DELETE, omitted when 0 for PUT) and when the watcher
// received it. The fields after those two are etcdkit's: what a restore
// needs beyond the watch stream. etcd-backup-restore's decoder ignores
// fields it does not declare, so its restores read these deltas as before.
type Event struct {
	EtcdEvent *mvccpb.Event `json:"etcdEvent"`
	Time      time.Time     `json:"time"`
	// LeaseTTL is the granted TTL, in seconds, of the lease of
	// EtcdEvent.Kv, on the first event of a lease the capture had not
	// recorded: the watch says which lease a key has, never how long it
	// lives, and a restore grants the lease again with it.
	LeaseTTL int64 `json:"leaseTTL,omitempty"`
	// RevokedLeases are leases recorded before that the cluster no longer
	// held when this event's delta was written.
	RevokedLeases []int64 `json:"revokedLeases,omitempty"`
	// Auth is the users and roles, on the last event of a delta written
	// after they changed.
	Auth *Auth `json:"auth,omitempty"`
}

// Revision is the revision the event belongs to.
func (e Event) Revision() int64 { return e.EtcdEvent.GetKv().GetModRevision() }

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
	return &closers{Reader: newVerifier(dec), closers: []io.Closer{dec, obj}}, nil
}

// DeltaReader decodes the events of a delta snapshot one at a time, so a
// delta of any size is read in constant memory.
type DeltaReader struct {
	payload io.ReadCloser
	dec     *json.Decoder
	name    string
	started bool
	last    int64
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
	return NewDeltaReader(payload, s.Key), nil
}

// NewDeltaReader decodes events from a delta's payload, such as one Open
// returned or a local copy of it. name appears in errors.
func NewDeltaReader(payload io.ReadCloser, name string) *DeltaReader {
	return &DeltaReader{payload: payload, dec: json.NewDecoder(payload), name: name}
}

// Next returns the next event, in revision order. It returns io.EOF after
// the last one, once the object's trailer was verified.
func (d *DeltaReader) Next() (Event, error) {
	if !d.started {
		if err := d.expectDelim('['); err != nil {
			return Event{}, err
		}
		d.started = true
	}
	if !d.dec.More() {
		if err := d.expectDelim(']'); err != nil {
			return Event{}, err
		}
		return Event{}, d.end()
	}
	var raw json.RawMessage
	if err := d.dec.Decode(&raw); err != nil {
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
	return ev, nil
}

func (d *DeltaReader) expectDelim(want json.Delim) error {
	tok, err := d.dec.Token()
	if err != nil {
		return d.fail(err)
	}
	if tok != want {
		return d.fail(fmt.Errorf("want %q, found %v", want, tok))
	}
	return nil
}

// end reads past the JSON so the verifier checks the trailer; only
// whitespace may follow the array.
func (d *DeltaReader) end() error {
	rest, err := io.ReadAll(io.MultiReader(d.dec.Buffered(), d.payload))
	if err != nil {
		return d.fail(err)
	}
	for _, b := range rest {
		if b != ' ' && b != '\n' && b != '\r' && b != '\t' {
			return d.fail(errors.New("data after the event array"))
		}
	}
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
