// Package wire reads the protocol buffer wire format: the tags, varints
// and length-delimited fields of etcd's WAL records and snap files. It is
// the few functions validate needs, so that checking a data dir pulls in
// no protobuf module.
package wire

import (
	"encoding/binary"
	"errors"
	"math"
)

// Number is a field number.
type Number int32

// Type is a wire type.
type Type int8

// The wire types.
const (
	VarintType     Type = 0
	Fixed64Type    Type = 1
	BytesType      Type = 2
	StartGroupType Type = 3
	EndGroupType   Type = 4
	Fixed32Type    Type = 5
)

// The errors the Consume functions return as negative lengths.
const (
	errCodeTruncated = -1 - iota
	errCodeFieldNumber
	errCodeOverflow
	errCodeReserved
	errCodeEndGroup
)

// ParseError returns the error a Consume function's negative n stands for.
func ParseError(n int) error {
	switch n {
	case errCodeTruncated:
		return errors.New("unexpected end of data")
	case errCodeFieldNumber:
		return errors.New("invalid field number")
	case errCodeOverflow:
		return errors.New("variable length integer overflow")
	case errCodeReserved:
		return errors.New("cannot parse reserved wire type")
	case errCodeEndGroup:
		return errors.New("mismatching end group marker")
	}
	return errors.New("parse error")
}

// ConsumeVarint reads a varint: its value and length, or a negative n.
func ConsumeVarint(b []byte) (v uint64, n int) {
	v, n = binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, errCodeTruncated
	case n < 0:
		return 0, errCodeOverflow
	}
	return v, n
}

// ConsumeTag reads a field's tag.
func ConsumeTag(b []byte) (Number, Type, int) {
	v, n := ConsumeVarint(b)
	if n < 0 {
		return 0, 0, n
	}
	num, typ := v>>3, Type(v&7)
	if num < 1 || num > math.MaxInt32 {
		return 0, 0, errCodeFieldNumber
	}
	return Number(num), typ, n
}

// ConsumeBytes reads a length-delimited value.
func ConsumeBytes(b []byte) ([]byte, int) {
	m, n := ConsumeVarint(b)
	if n < 0 {
		return nil, n
	}
	if m > uint64(len(b)-n) {
		return nil, errCodeTruncated
	}
	return b[n : n+int(m)], n + int(m)
}

// ConsumeFieldValue reads the value of a field of type typ, a group up to
// its end marker included.
func ConsumeFieldValue(num Number, typ Type, b []byte) int {
	return consumeValue(num, typ, b, 0)
}

// groupDepth bounds nested groups, as protobuf's own reader does.
const groupDepth = 10000

func consumeValue(num Number, typ Type, b []byte, depth int) int {
	switch typ {
	case VarintType:
		_, n := ConsumeVarint(b)
		return n
	case Fixed32Type:
		if len(b) < 4 {
			return errCodeTruncated
		}
		return 4
	case Fixed64Type:
		if len(b) < 8 {
			return errCodeTruncated
		}
		return 8
	case BytesType:
		_, n := ConsumeBytes(b)
		return n
	case StartGroupType:
		if depth > groupDepth {
			return errCodeOverflow
		}
		for total := 0; ; {
			num2, typ2, n := ConsumeTag(b[total:])
			if n < 0 {
				return n
			}
			total += n
			if typ2 == EndGroupType {
				if num2 != num {
					return errCodeEndGroup
				}
				return total
			}
			n = consumeValue(num2, typ2, b[total:], depth+1)
			if n < 0 {
				return n
			}
			total += n
		}
	case EndGroupType:
		return errCodeEndGroup
	}
	return errCodeReserved
}
