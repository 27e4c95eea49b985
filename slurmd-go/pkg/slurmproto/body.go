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

// Codec packs and unpacks one body layout, valid for header versions
// MinVersion..MaxVersion inclusive.
type Codec struct {
	MinVersion uint16
	MaxVersion uint16
	Encode     EncodeFunc
	Decode     DecodeFunc
}

// registry maps a message type to its layouts, sorted by MinVersion. It is
// written only from init functions (RegisterBody), then read-only, so it
// needs no lock.
var registry = map[MsgType][]Codec{}

// RegisterBody adds a body layout for t. Call it only from init functions.
// It panics on overlapping version ranges: that is a programming error.
//
// To support a newer Slurm, register a codec for the new range and narrow
// the old one's MaxVersion, e.g. Version2205..0x26ff and 0x2700..0x27ff.
func RegisterBody(t MsgType, c Codec) {
	if c.MinVersion > c.MaxVersion || c.Encode == nil || c.Decode == nil {
		panic(fmt.Sprintf("slurmproto: bad codec for %v", t))
	}
	for _, o := range registry[t] {
		if c.MinVersion <= o.MaxVersion && o.MinVersion <= c.MaxVersion {
			panic(fmt.Sprintf("slurmproto: overlapping codecs for %v", t))
		}
	}
	cs := append(registry[t], c)
	sort.Slice(cs, func(i, j int) bool { return cs[i].MinVersion < cs[j].MinVersion })
	registry[t] = cs
}

// register is RegisterBody for several types sharing one codec.
func register(c Codec, types ...MsgType) {
	for _, t := range types {
		RegisterBody(t, c)
	}
}

// allVersions is the range every 20.11..22.05 layout shares.
func allVersions(enc EncodeFunc, dec DecodeFunc) Codec {
	return Codec{MinVersion: MinVersion, MaxVersion: MaxHeaderVersion, Encode: enc, Decode: dec}
}

func lookup(version uint16, t MsgType) (Codec, error) {
	for _, c := range registry[t] {
		if version >= c.MinVersion && version <= c.MaxVersion {
			return c, nil
		}
	}
	if _, ok := registry[t]; ok {
		return Codec{}, fmt.Errorf("%w: %v has no layout for version 0x%04x", ErrUnknownMsgType, t, version)
	}
	return Codec{}, fmt.Errorf("%w: %v", ErrUnknownMsgType, t)
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
