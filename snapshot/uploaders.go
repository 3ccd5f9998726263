package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// ErrNewerUploader: another run recorded itself as the prefix's uploader
// after this one: two uploaders on one prefix (a second sidecar beside the
// leader, a process that did not die). The newer one writes.
var ErrNewerUploader = errors.New("two uploaders on one prefix")

// keptUploaders is how many records stay: enough to name the runs an
// operator looks for, few enough that a check lists them cheaply.
const keptUploaders = 10

// Uploader is the record of one run.
type Uploader struct {
	Seq       int64     `json:"seq"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Endpoints []string  `json:"endpoints"`
	ClusterID string    `json:"cluster_id,omitempty"`
	Began     time.Time `json:"began"`
}

func uploaderKey(seq int64) string { return fmt.Sprintf("%s/%010d.json", uploaderDir, seq) }

// Key is where u is recorded.
func (u Uploader) Key() string { return uploaderKey(u.Seq) }

// uploaderSeqs are the numbers of the records that can be this project's:
// named as uploaderKey names them, and each one's number follows another
// record's (or is the lowest kept). Runs take numbers one after another
// and retention deletes only the oldest, so a record far past the others
// (one anyone with the bucket's credentials can add, and no one can
// delete on a locked bucket) is not believed: it would otherwise stop
// every uploader for good, even one restarted to take over.
func uploaderSeqs(ctx context.Context, st store.Store) ([]int64, error) {
	objs, err := st.List(ctx, uploaderDir+"/")
	if err != nil {
		return nil, fmt.Errorf("list uploaders: %w", err)
	}
	var seqs []int64
	for _, o := range objs {
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(o.Key, uploaderDir+"/"), ".json"), 10, 64)
		if err == nil && n > 0 && n < maxUploaderSeq && o.Key == uploaderKey(n) {
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	var believed []int64
	for i, n := range seqs {
		if i == 0 || n == seqs[i-1]+1 {
			believed = append(believed, n)
		}
	}
	return believed, nil
}

// maxUploaderSeq bounds the numbers uploaderKey writes in its ten digits.
const maxUploaderSeq = 1e10 - 1

// RegisterUploader records u as the newest uploader of st and removes the
// records older than the kept ones. The newest uploader is the one that
// writes: an older one still running (a second sidecar, a process that
// did not die) finds it before its next object and stops.
func RegisterUploader(ctx context.Context, st store.Store, u Uploader) (Uploader, error) {
	if u.Host == "" {
		u.Host, _ = os.Hostname()
	}
	if u.PID == 0 {
		u.PID = os.Getpid()
	}
	for range 10 {
		seqs, err := uploaderSeqs(ctx, st)
		if err != nil {
			return u, err
		}
		u.Seq = 1
		for _, n := range seqs {
			u.Seq = max(u.Seq, n+1)
		}
		err = putJSON(ctx, st, uploaderKey(u.Seq), u)
		if errors.Is(err, store.ErrExists) {
			// Another run took the number first: take the next.
			continue
		}
		if err != nil {
			return u, fmt.Errorf("record uploader %s: %w", uploaderKey(u.Seq), err)
		}
		for _, n := range seqs {
			if n <= u.Seq-keptUploaders {
				_ = st.Delete(ctx, uploaderKey(n))
			}
		}
		return u, nil
	}
	return u, fmt.Errorf("record uploader: %w: ten other runs took the next number first", ErrNewerUploader)
}

// NewerUploader fails with ErrNewerUploader when a run newer than u recorded
// itself on st, naming it.
func NewerUploader(ctx context.Context, st store.Store, u Uploader) error {
	seqs, err := uploaderSeqs(ctx, st)
	if err != nil {
		return err
	}
	newest := u.Seq
	for _, n := range seqs {
		newest = max(newest, n)
	}
	if newest == u.Seq {
		return nil
	}
	other, _, err := getJSON[Uploader](ctx, st, uploaderKey(newest))
	if errors.Is(err, errBadRecord) {
		// No run writes a record it cannot read back: one added by hand
		// stops nobody (a run that begins after it takes the next number).
		return nil
	}
	who := uploaderKey(newest)
	if err == nil && other.Host != "" {
		who = fmt.Sprintf("%s (host %s, pid %d, endpoints %s, began %s)", who, other.Host, other.PID,
			strings.Join(other.Endpoints, ","), other.Began.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: uploader %s began after this one (%s): it writes the backups from now on, this one stops; run one uploader per prefix (restart this one to take over)",
		ErrNewerUploader, who, uploaderKey(u.Seq))
}
