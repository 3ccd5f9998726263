package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/etcdkit/etcdkit/store"
)

// put streams what write produces, encoded by c, into the object key. The
// store sees an error when write fails, so a failed snapshot never becomes
// visible.
func put(ctx context.Context, st store.Store, key string, c Codec, how encoding, write func(io.Writer) error) error {
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
	err := st.Put(ctx, key, pr)
	// A store that gave up early leaves the writer blocked on the pipe.
	pr.CloseWithError(errors.New("store stopped reading"))
	if werr := <-done; err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", key, err)
	}
	return nil
}

// writeDelta writes events as etcd-backup-restore does: the JSON array
// json.Marshal makes of them, then the raw SHA-256 of those JSON bytes.
// Events are marshalled one at a time so memory does not double.
func writeDelta(w io.Writer, events []Event) error {
	h := sha256.New()
	out := io.MultiWriter(w, h)
	sep := []byte{'['}
	for _, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode event at revision %d: %w", ev.Revision(), err)
		}
		if _, err := out.Write(sep); err != nil {
			return err
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
		sep = []byte{','}
	}
	if len(events) == 0 {
		if _, err := out.Write(sep); err != nil {
			return err
		}
	}
	if _, err := out.Write([]byte{']'}); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}
