package snapshot

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"time"
)

// fastEvent parses an event in exactly the form json.Marshal writes it
// (and writeDelta, and etcd-backup-restore): fields in struct order, no
// whitespace, no escapes, integers as digits. Anything else is not
// parsed (ok false) and goes to encoding/json, which is several times
// slower and, on a restore, as slow as writing the revisions.
func fastEvent(b []byte) (ev Event, ok bool) {
	p := parser{b: b}
	if !p.lit(`{"etcdEvent":{`) {
		return Event{}, false
	}
	e := &WatchEvent{}
	for !p.lit("}") {
		name, ok := p.name()
		if !ok {
			return Event{}, false
		}
		switch name {
		case "type":
			t, ok := p.int()
			if !ok {
				return Event{}, false
			}
			e.Type = EventType(t)
		case "kv":
			if e.Kv, ok = p.keyValue(); !ok {
				return Event{}, false
			}
		case "prev_kv":
			if e.PrevKv, ok = p.keyValue(); !ok {
				return Event{}, false
			}
		default:
			return Event{}, false
		}
		p.lit(",")
	}
	if !p.lit(`,"time":`) {
		return Event{}, false
	}
	ts, ok := p.str()
	if !ok {
		return Event{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return Event{}, false
	}
	ev = Event{EtcdEvent: e, Time: t}
	if p.lit(`,"leaseTTL":`) {
		if ev.LeaseTTL, ok = p.int(); !ok {
			return Event{}, false
		}
	}
	if p.lit(`,"revokedLeases":[`) {
		for !p.lit("]") {
			id, ok := p.int()
			if !ok {
				return Event{}, false
			}
			ev.RevokedLeases = append(ev.RevokedLeases, id)
			p.lit(",")
		}
	}
	if !p.lit("}") || p.i != len(p.b) {
		return Event{}, false
	}
	return ev, true
}

type parser struct {
	b []byte
	i int
}

// lit consumes s if it comes next.
func (p *parser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// str consumes a string without escapes and returns its content.
func (p *parser) str() ([]byte, bool) {
	if !p.lit(`"`) {
		return nil, false
	}
	rest := p.b[p.i:]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return nil, false
	}
	p.i += end + 1
	return rest[:end], true
}

// name consumes `"name":`.
func (p *parser) name() (string, bool) {
	s, ok := p.str()
	if !ok || !p.lit(":") {
		return "", false
	}
	return string(s), true
}

func (p *parser) int() (int64, bool) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

func (p *parser) bytes() ([]byte, bool) {
	s, ok := p.str()
	if !ok {
		return nil, false
	}
	out, err := base64.StdEncoding.AppendDecode(nil, s)
	return out, err == nil
}

func (p *parser) keyValue() (*KeyValue, bool) {
	if !p.lit("{") {
		return nil, false
	}
	kv := &KeyValue{}
	for !p.lit("}") {
		name, ok := p.name()
		if !ok {
			return nil, false
		}
		switch name {
		case "key":
			kv.Key, ok = p.bytes()
		case "value":
			kv.Value, ok = p.bytes()
		case "create_revision":
			kv.CreateRevision, ok = p.int()
		case "mod_revision":
			kv.ModRevision, ok = p.int()
		case "version":
			kv.Version, ok = p.int()
		case "lease":
			kv.Lease, ok = p.int()
		default:
			return nil, false
		}
		if !ok {
			return nil, false
		}
		p.lit(",")
	}
	return kv, true
}
