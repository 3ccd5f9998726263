package azure

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"

	"github.com/etcdkit/etcdkit/store"
)

// lock is the immutability policy a new blob gets: none without Lock.
func (s *Store) lock() (*blob.ImmutabilityPolicySetting, *time.Time) {
	if s.cfg.Lock.For <= 0 {
		return nil, nil
	}
	mode := blob.ImmutabilityPolicySettingUnlocked
	if s.cfg.Lock.Compliance {
		mode = blob.ImmutabilityPolicySettingLocked
	}
	return &mode, to.Ptr(s.cfg.Lock.Until(time.Now()))
}

// LockedUntil is the end of the blob's version-level immutability policy
// (store.LockTeller); zero in a container without version-level
// immutability, asked nothing (a container-level policy is not told per
// blob).
func (s *Store) LockedUntil(ctx context.Context, key string) (time.Time, error) {
	if !s.versionLocks {
		return time.Time{}, nil
	}
	name, err := s.loc.Object(key)
	if err != nil {
		return time.Time{}, err
	}
	p, err := s.container.NewBlobClient(name).GetProperties(ctx, nil)
	if err != nil {
		return time.Time{}, s.fail("head", key, err)
	}
	if p.ImmutabilityPolicyExpiresOn == nil {
		return time.Time{}, nil
	}
	return *p.ImmutabilityPolicyExpiresOn, nil
}

var _ store.LockTeller = (*Store)(nil)
