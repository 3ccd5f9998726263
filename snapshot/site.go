package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// ErrOtherSite: a second site holds, or was claimed for, another store's
// backups. Copying there, and its retention, would mix two histories and
// delete the other's.
var ErrOtherSite = errors.New("the second site is another store's")

// site names a store that others copy: an ID made once, when it is first
// copied.
type site struct {
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
}

// ClaimMirror checks that dst may receive copies of src's snapshots, and
// records so on dst: dst names src's ID (made on src when it has none)
// once, create-only. A dst that names another ID fails with ErrOtherSite;
// so does a dst never claimed that holds a full snapshot src does not (the
// backups of another cluster, or a copy src has outgrown), which only an
// operator can tell apart.
func ClaimMirror(ctx context.Context, src, dst store.Store) error {
	id, err := siteID(ctx, src)
	if err != nil {
		return fmt.Errorf("the first site's ID: %w", err)
	}
	claimed, ok, err := getJSON[site](ctx, dst, mirrorKey)
	switch {
	case err != nil:
		return fmt.Errorf("the second site's claim: %w", err)
	case ok && claimed.ID == id:
		return nil
	case ok:
		return fmt.Errorf("%w: %s records that it mirrors site %s (since %s), not this one (%s): point the second site at another prefix",
			ErrOtherSite, mirrorKey, claimed.ID, claimed.Created.Format(time.RFC3339), id)
	}
	there, err := List(ctx, dst)
	if err != nil {
		return err
	}
	here, err := List(ctx, src)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, s := range here.All() {
		have[targetKey(s)] = true
	}
	for _, s := range there.All() {
		if s.Kind == KindFull && !have[s.Key] {
			return fmt.Errorf("%w: it holds %s, which the first store does not (another cluster's backups, or an older copy): point the second site at an empty prefix, or remove what it holds there on purpose",
				ErrOtherSite, s.Key)
		}
	}
	err = putJSON(ctx, dst, mirrorKey, site{ID: id, Created: time.Now().UTC()})
	if errors.Is(err, ErrConflict) {
		// Claimed meanwhile: by this site, or by another, as read again.
		return ClaimMirror(ctx, src, dst)
	}
	return err
}

// siteID is st's ID, made on its first call.
func siteID(ctx context.Context, st store.Store) (string, error) {
	s, ok, err := getJSON[site](ctx, st, siteKey)
	if err != nil || ok {
		return s.ID, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	err = putJSON(ctx, st, siteKey, site{ID: hex.EncodeToString(b[:]), Created: time.Now().UTC()})
	if err != nil && !errors.Is(err, ErrConflict) {
		return "", err
	}
	// Made here or by another at once: the one stored is the ID.
	s, _, err = getJSON[site](ctx, st, siteKey)
	return s.ID, err
}
