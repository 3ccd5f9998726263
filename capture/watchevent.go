package capture

import (
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdkit/etcdkit/snapshot"
)

// watchEvent is a watch's event in the on-store format's type. The key
// and value are shared, not copied: the watch hands each event over once.
func watchEvent(e *mvccpb.Event) *snapshot.WatchEvent {
	return &snapshot.WatchEvent{Type: snapshot.EventType(e.Type), Kv: keyValue(e.Kv), PrevKv: keyValue(e.PrevKv)}
}

func keyValue(kv *mvccpb.KeyValue) *snapshot.KeyValue {
	if kv == nil {
		return nil
	}
	return &snapshot.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Value: kv.Value, Lease: kv.Lease}
}
