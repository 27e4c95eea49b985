package slurmproto

import (
	"fmt"
	"sort"
)

// Body is a decoded message body. Implementations are plain structs in
// msgs_*.go; MsgType tells EncodeBody which codec to use.
type Body interface {
	MsgType() MsgType
}

// EncodeFunc appends the body b, packed for protocol version, to p.
type EncodeFunc func(p *Packer, version uint16, b Body) error

// DecodeFunc reads a body of type t for protocol version from u. It must
// not check for trailing bytes (ret_list entries are followed by more data).
type DecodeFunc func(u *Unpacker, version uint16, t MsgType) (Body, error)

// Codec packs and unpacks one body layout, for exactly the protocol
// versions it lists. Layouts that differ between releases in a few fields
// may branch on the version inside one codec, as Slurm's packers do; the
// list still names every release the codec was checked against.
type Codec struct {
	Versions []uint16
	Encode   EncodeFunc
	Decode   DecodeFunc
}

// registry maps a message type to its layouts. It is written only from init
// functions (RegisterBody), then read-only, so it needs no lock.
var registry = map[MsgType][]Codec{}

// RegisterBody adds a body layout for t. Call it only from init functions.
// It panics on a version registered twice for t, or one whose header this
// package does not know: those are programming errors.
//
// A (type, version) pair that was never registered has no layout: decoding
// or encoding it fails with ErrNoLayout (or ErrUnknownMsgType for a type no
// release registers), never with another release's layout.
func RegisterBody(t MsgType, c Codec) {
	if len(c.Versions) == 0 || c.Encode == nil || c.Decode == nil {
		panic(fmt.Sprintf("slurmproto: bad codec for %v", t))
	}
	for _, v := range c.Versions {
		if !ValidVersion(v) {
			panic(fmt.Sprintf("slurmproto: codec for %v at unknown version 0x%04x", t, v))
		}
		for _, o := range registry[t] {
			if in(o.Versions, v) {
				panic(fmt.Sprintf("slurmproto: two codecs for %v at 0x%04x", t, v))
			}
		}
	}
	c.Versions = append([]uint16(nil), c.Versions...)
	registry[t] = append(registry[t], c)
}

// register is RegisterBody for several types sharing one codec.
func register(c Codec, types ...MsgType) {
	for _, t := range types {
		RegisterBody(t, c)
	}
}

func lookup(version uint16, t MsgType) (Codec, error) {
	for _, c := range registry[t] {
		if in(c.Versions, version) {
			return c, nil
		}
	}
	if _, ok := registry[t]; ok {
		return Codec{}, fmt.Errorf("%w: %v at version 0x%04x (Slurm %s)", ErrNoLayout, t, version, ReleaseName(version))
	}
	return Codec{}, fmt.Errorf("%w: %v", ErrUnknownMsgType, t)
}

// Layouts lists, for each registered message type, the versions it has a
// layout for (tests and tools enumerate the registry with it).
func Layouts() map[MsgType][]uint16 {
	out := make(map[MsgType][]uint16, len(registry))
	for t, cs := range registry {
		for _, c := range cs {
			out[t] = append(out[t], c.Versions...)
		}
		sort.Slice(out[t], func(i, j int) bool { return out[t][i] < out[t][j] })
	}
	return out
}

// Registered reports whether t has a body layout in any release.
func Registered(t MsgType) bool {
	_, ok := registry[t]
	return ok
}

// HasBody reports whether a codec for t at version is registered.
func HasBody(version uint16, t MsgType) bool {
	_, err := lookup(version, t)
	return err == nil
}

// EncodeBody packs m for protocol version.
func EncodeBody(version uint16, m Body) ([]byte, error) {
	p := NewPacker(64)
	if err := PackBody(p, version, m); err != nil {
		return nil, err
	}
	return p.Bytes(), nil
}

// PackBody appends m, packed for protocol version, to p.
func PackBody(p *Packer, version uint16, m Body) error {
	c, err := lookup(version, m.MsgType())
	if err != nil {
		return err
	}
	if err := c.Encode(p, version, m); err != nil {
		return wrap("encode "+m.MsgType().String(), err)
	}
	return nil
}

// DecodeBody decodes a whole body of type t; trailing bytes are an error.
func DecodeBody(version uint16, t MsgType, b []byte) (Body, error) {
	m, n, err := DecodeBodyPrefix(version, t, b)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, fmt.Errorf("%w: %v body has %d trailing bytes", ErrMalformed, t, len(b)-n)
	}
	return m, nil
}

// DecodeBodyPrefix decodes a body of type t from the start of b and returns
// it with the number of bytes consumed (for ret_list entries, which carry
// no length).
func DecodeBodyPrefix(version uint16, t MsgType, b []byte) (Body, int, error) {
	c, err := lookup(version, t)
	if err != nil {
		return nil, 0, err
	}
	u := NewUnpacker(b)
	m, err := c.Decode(u, version, t)
	if err == nil {
		err = u.Err()
	}
	if err != nil {
		return nil, 0, wrap("decode "+t.String(), err)
	}
	return m, u.Offset(), nil
}

// wrongType is returned by encoders handed a body of another Go type.
func wrongType(b Body) error {
	return fmt.Errorf("%w: unexpected body type %T", ErrMalformed, b)
}
