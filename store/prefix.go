package store

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// WithPrefix returns a view of s in which every key is stored under
// prefix + "/". Two views with different prefixes never see each other's
// objects, which lets one bucket hold the backups of several clusters.
func WithPrefix(s Store, prefix string) (Store, error) {
	p, err := CleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if p == "" {
		return s, nil
	}
	return &prefixed{s: s, prefix: p}, nil
}

type prefixed struct {
	s      Store
	prefix string
}

// Unwrap and KeyPrefix make it a view.
func (p *prefixed) Unwrap() Store     { return p.s }
func (p *prefixed) KeyPrefix() string { return p.prefix }

func (p *prefixed) String() string { return fmt.Sprintf("%v/%s", p.s, escapePath(p.prefix)) }

func (p *prefixed) Put(ctx context.Context, key string, r io.Reader) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return p.s.Put(ctx, JoinKey(p.prefix, key), r)
}

func (p *prefixed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	return p.s.Get(ctx, JoinKey(p.prefix, key))
}

func (p *prefixed) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	objs, err := p.s.List(ctx, p.prefix+"/"+prefix)
	if err != nil {
		return nil, err
	}
	for i := range objs {
		objs[i].Key = strings.TrimPrefix(objs[i].Key, p.prefix+"/")
	}
	return objs, nil
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return p.s.Delete(ctx, JoinKey(p.prefix, key))
}
