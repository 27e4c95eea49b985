package slurmproto

// typedCodec builds a Codec for body type T from functions working on *T.
// Encoders accept both T and *T; decoders return *T.
func typedCodec[T any, PT interface {
	*T
	Body
}](versions []uint16, enc func(p *Packer, v uint16, m *T) error, dec func(u *Unpacker, v uint16, t MsgType, m *T) error) Codec {
	return Codec{
		Versions: versions,
		Encode: func(p *Packer, v uint16, b Body) error {
			switch m := b.(type) {
			case PT:
				if m == nil {
					return wrongType(b)
				}
				return enc(p, v, (*T)(m))
			case T:
				return enc(p, v, &m)
			}
			return wrongType(b)
		},
		Decode: func(u *Unpacker, v uint16, t MsgType) (Body, error) {
			m := new(T)
			if err := dec(u, v, t, m); err != nil {
				return nil, err
			}
			if err := u.Err(); err != nil {
				return nil, err
			}
			return PT(m), nil
		},
	}
}
