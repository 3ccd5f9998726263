package upgrade

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/etcdkit/etcdkit/internal/etcdstorage"
	"github.com/etcdkit/etcdkit/validate"
)

// members maps member IDs to names ("" when the record names none).
type members map[uint64]string

func (m members) String() string {
	var out []string
	for id, name := range m {
		s := strconv.FormatUint(id, 16)
		if name != "" {
			s += " (" + name + ")"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// database is what a check reads of an etcd database.
type database struct {
	// members is the v3 store's membership: the members bucket less the
	// members_removed one.
	members members
	// applied is the consistent index the database was applied to.
	applied uint64
	// release is what it says of the releases that ran it.
	release validate.Release
}

// readDatabase reads an etcd database for the checks, read only.
func readDatabase(dbPath string) (database, error) {
	// bbolt would block opening a FIFO and initialise an empty file.
	switch info, err := os.Stat(dbPath); {
	case err != nil:
		return database{}, fmt.Errorf("database %s: %w", dbPath, err)
	case !info.Mode().IsRegular():
		return database{}, fmt.Errorf("database %s is not a regular file (%s)", dbPath, info.Mode().Type())
	case info.Size() == 0:
		return database{}, fmt.Errorf("database %s is empty", dbPath)
	}
	db, err := bolt.Open(dbPath, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return database{}, fmt.Errorf("database %s is in use: stop its member first, or check the live cluster", dbPath)
	}
	if err != nil {
		return database{}, fmt.Errorf("database %s: %w", dbPath, err)
	}
	defer func() { _ = db.Close() }()
	out := database{members: members{}}
	err = db.View(func(tx *bolt.Tx) error {
		removed := map[string]bool{}
		if b := tx.Bucket([]byte("members_removed")); b != nil {
			_ = b.ForEach(func(k, _ []byte) error { removed[string(k)] = true; return nil })
		}
		if b := tx.Bucket([]byte("meta")); b != nil {
			if v := b.Get([]byte("consistent_index")); len(v) == 8 {
				out.applied = binary.BigEndian.Uint64(v)
			}
		}
		var err error
		if out.release, err = validate.ReadRelease(tx); err != nil {
			return err
		}
		b := tx.Bucket([]byte("members"))
		if b == nil {
			return errors.New("it has no members bucket: not an etcd 3 database")
		}
		return b.ForEach(func(k, v []byte) error {
			if removed[string(k)] {
				return nil
			}
			id, err := strconv.ParseUint(string(k), 16, 64)
			if err != nil {
				return fmt.Errorf("member key %q: %w", k, err)
			}
			var m struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(v, &m)
			out.members[id] = m.Name
			return nil
		})
	})
	if err != nil {
		return database{}, fmt.Errorf("database %s: %w", dbPath, err)
	}
	return out, nil
}

// apply makes a change of the log on m, as a restart applies it to both
// stores.
func (m members) apply(c etcdstorage.ConfChange) {
	if c.Remove {
		delete(m, c.ID)
		return
	}
	if _, ok := m[c.ID]; !ok {
		m[c.ID] = c.Name
	}
}

// compare is the zombie finding: v3 is what 3.6 will read, v2 what 3.5
// runs on.
func compare(subject string, v3, v2 members) Finding {
	f := Finding{Check: CheckZombies, Subject: subject}
	zombies, missing := members{}, members{}
	for id, name := range v3 {
		if _, ok := v2[id]; !ok {
			zombies[id] = name
		}
	}
	for id, name := range v2 {
		if _, ok := v3[id]; !ok {
			missing[id] = name
		}
	}
	switch {
	case len(zombies) > 0 || len(missing) > 0:
		var why []string
		if len(zombies) > 0 {
			why = append(why, fmt.Sprintf("the v3 store lists %s, which etcd 3.5's v2 membership does not: 3.6 reads v3 only and brings them back into consensus", zombies))
		}
		if len(missing) > 0 {
			why = append(why, fmt.Sprintf("the v2 membership lists %s, which the v3 store does not: 3.6 would lose them", missing))
		}
		f.Status, f.Detail = Fail, strings.Join(why, "; ")
		f.Fix = fmt.Sprintf("run etcd 3.5.%d or later on every member and restart each once: it syncs the v3 store's membership from the v2 store's", MinVersion[2])
	default:
		f.Status, f.Detail = Pass, fmt.Sprintf("the v2 and v3 stores list the same %d members: %s", len(v3), v3)
	}
	return f
}
