package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/store/internal/xfer"
)

// Mem is a store in process memory. Every mem:// URL opens a new, empty
// one; code that shares a store between parts of one process passes the
// Store value around instead.
type Mem struct {
	mu      sync.RWMutex
	objects map[string]memObject
}

type memObject struct {
	data     []byte
	modified time.Time
}

func openMem(_ context.Context, u *url.URL, _ Options) (Store, error) {
	if err := NewQuery(u).Unused(); err != nil {
		return nil, fmt.Errorf("store %s: %w", u.Redacted(), err)
	}
	prefix, err := CleanPrefix(u.Host + u.Path)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", u.Redacted(), err)
	}
	return WithPrefix(NewMem(), prefix)
}

// NewMem returns an empty memory store.
func NewMem() *Mem { return &Mem{objects: map[string]memObject{}} }

func (m *Mem) String() string { return "mem://" }

func (m *Mem) Put(ctx context.Context, key string, r io.Reader) error {
	if err := CheckKey(key); err != nil {
		return fmt.Errorf("store mem://: %w", err)
	}
	data, err := io.ReadAll(xfer.ContextReader(ctx, r))
	if err != nil {
		return fmt.Errorf("store mem://: put %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok {
		return fmt.Errorf("store mem://: put %s: %w", key, ErrExists)
	}
	m.objects[key] = memObject{data: data, modified: time.Now()}
	return nil
}

func (m *Mem) Get(_ context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, fmt.Errorf("store mem://: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	o, ok := m.objects[key]
	if !ok {
		return nil, fmt.Errorf("store mem://: get %s: %w", key, ErrNotFound)
	}
	// Objects are never modified in place (Put never replaces one), so the
	// reader can share the bytes.
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

func (m *Mem) List(_ context.Context, prefix string) ([]Object, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("store mem://: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var objs []Object
	for k, o := range m.objects {
		if strings.HasPrefix(k, prefix) {
			objs = append(objs, Object{Key: k, Size: int64(len(o.data)), Modified: o.modified})
		}
	}
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return objs, nil
}

func (m *Mem) Delete(_ context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return fmt.Errorf("store mem://: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}
