package store

import (
	"context"
	"strings"
)

// ExcludedLister is a store that can list what List leaves out: the
// objects an operator took out of the backups with ExcludeTag.
type ExcludedLister interface {
	ListExcluded(ctx context.Context, prefix string) ([]Object, error)
}

// ListExcluded lists the objects under prefix that carry ExcludeTag, for
// a store (or a view over one) that marks objects so; none for others.
func ListExcluded(ctx context.Context, st Store, prefix string) ([]Object, error) {
	l, viewPrefix, ok := as[ExcludedLister](st)
	if !ok {
		return nil, nil
	}
	objs, err := l.ListExcluded(ctx, JoinKey(viewPrefix, prefix))
	if viewPrefix == "" || err != nil {
		return objs, err
	}
	for i := range objs {
		objs[i].Key = strings.TrimPrefix(objs[i].Key, viewPrefix+"/")
	}
	return objs, nil
}
