package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/etcdkit/etcdkit/store"
)

// listed is one prefix of a store whose objects were listed already: its
// lists are answered from that listing, its reads go to the store. A scan
// lists the bucket once, not each prefix's directories again.
type listed struct {
	st     store.Store
	prefix string // "" or ending in "/"
	objs   []store.Object
}

var errReadOnly = errors.New("a fleet scan only reads")

func (l *listed) String() string { return fmt.Sprintf("%v/%s", l.st, l.prefix) }

func (l *listed) List(_ context.Context, prefix string) ([]store.Object, error) {
	var out []store.Object
	for _, o := range l.objs {
		if strings.HasPrefix(o.Key, prefix) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (l *listed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return l.st.Get(ctx, l.prefix+key)
}

func (l *listed) Put(context.Context, string, io.Reader) error { return errReadOnly }

func (l *listed) Delete(context.Context, string) error { return errReadOnly }
