package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// GuardFile is the name of the guard in a data dir, beside member/: etcd
// ignores it, and it survives a wipe of member/.
const GuardFile = "etcdkit-guard.json"

// Guard records whose data dir this is.
type Guard struct {
	ClusterToken string    `json:"clusterToken"`
	MemberName   string    `json:"memberName"`
	Written      time.Time `json:"written"`
}

// WriteGuard records the member and cluster a data dir belongs to. A
// wrapper calls it after the member started on the data dir, so a volume
// mounted under the wrong member later is recognised (WrongVolume)
// instead of started. It replaces the guard atomically.
func WriteGuard(dir, name, token string) error {
	b, err := json.Marshal(Guard{ClusterToken: token, MemberName: name, Written: time.Now().UTC()})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, GuardFile+".tmp-")
	if err != nil {
		return fmt.Errorf("guard %s: %w", dir, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("guard %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("guard %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("guard %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, GuardFile)); err != nil {
		return fmt.Errorf("guard %s: %w", dir, err)
	}
	return nil
}

// checkGuard compares the guard with the member and cluster expected. A
// data dir without a guard passes: it predates the wrapper.
func checkGuard(dir, name, token string) (Verdict, string, string) {
	path := filepath.Join(dir, GuardFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", ""
	}
	if err != nil {
		return Corrupt, path, fmt.Sprintf("guard %s: %v", path, err)
	}
	var g Guard
	if err := json.Unmarshal(b, &g); err != nil {
		return Corrupt, path, fmt.Sprintf("guard %s: %v", path, err)
	}
	switch {
	case name != "" && g.MemberName != name:
		return WrongVolume, path, fmt.Sprintf("guard %s: the data dir is member %q's, not %q's (to give it to %q on purpose, remove the guard file)", path, g.MemberName, name, name)
	case token != "" && g.ClusterToken != token:
		return WrongVolume, path, fmt.Sprintf("guard %s: the data dir is of cluster %q, not %q (to give it to this cluster on purpose, remove the guard file)", path, g.ClusterToken, token)
	}
	return "", "", ""
}
