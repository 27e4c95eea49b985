package slurmproto

import (
	"fmt"
	"math/bits"
	"strings"
)

// Bitmap is a fixed-size bit string (Slurm bitstr_t), as carried in job
// credentials (core bitmaps). Bit 0 is the least significant bit of the
// last hex digit on the wire.
type Bitmap struct {
	n     int
	words []uint64
}

// NewBitmap returns a bitmap of n bits, all clear.
func NewBitmap(n int) *Bitmap {
	if n < 0 {
		n = 0
	}
	return &Bitmap{n: n, words: make([]uint64, (n+63)/64)}
}

// Len returns the size in bits.
func (b *Bitmap) Len() int { return b.n }

// Set sets bit i; out-of-range indexes are ignored.
func (b *Bitmap) Set(i int) {
	if i >= 0 && i < b.n {
		b.words[i/64] |= 1 << (i % 64)
	}
}

// Clear clears bit i; out-of-range indexes are ignored.
func (b *Bitmap) Clear(i int) {
	if i >= 0 && i < b.n {
		b.words[i/64] &^= 1 << (i % 64)
	}
}

// Test reports whether bit i is set.
func (b *Bitmap) Test(i int) bool {
	return i >= 0 && i < b.n && b.words[i/64]&(1<<(i%64)) != 0
}

// Count returns the number of set bits.
func (b *Bitmap) Count() int {
	c := 0
	for _, w := range b.words {
		c += bits.OnesCount64(w)
	}
	return c
}

// Indexes returns the set bit positions in ascending order.
func (b *Bitmap) Indexes() []int {
	var out []int
	for i := 0; i < b.n; i++ {
		if b.Test(i) {
			out = append(out, i)
		}
	}
	return out
}

// HexMask formats the bitmap like bit_fmt_hexmask: "0x" followed by
// ceil(n/4) upper-case hex digits, most significant first; "0x0" for 0 bits.
func (b *Bitmap) HexMask() string {
	if b.n == 0 {
		return "0x0"
	}
	nd := (b.n + 3) / 4
	out := make([]byte, 2+nd)
	out[0], out[1] = '0', 'x'
	for d := 0; d < nd; d++ {
		var v uint64
		bit := d * 4
		v = (b.words[bit/64] >> (bit % 64)) & 0xf
		out[2+nd-1-d] = "0123456789ABCDEF"[v]
	}
	return string(out)
}

// String returns HexMask.
func (b *Bitmap) String() string { return b.HexMask() }

// ParseHexMask parses a bit_fmt_hexmask string into an n-bit bitmap. The
// "0x" prefix is optional; set bits at or beyond n are an error (as in
// bit_unfmt_hexmask). The string must have at least ceil(n/4) digits, which
// Slurm always sends, so n is bounded by the input size.
func ParseHexMask(n int, s string) (*Bitmap, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: negative bitmap size", ErrMalformed)
	}
	s = strings.TrimPrefix(s, "0x")
	if len(s)*4 < n {
		return nil, fmt.Errorf("%w: bitmap of %d bits has only %d hex digits", ErrMalformed, n, len(s))
	}
	b := NewBitmap(n)
	for d := 0; d < len(s); d++ {
		c := s[len(s)-1-d]
		var v uint64
		switch {
		case c >= '0' && c <= '9':
			v = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			v = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			v = uint64(c-'A') + 10
		default:
			return nil, fmt.Errorf("%w: bad hex digit %q in bitmap", ErrMalformed, c)
		}
		if v == 0 {
			continue
		}
		bit := d * 4
		if bit+bits.Len64(v) > n {
			return nil, fmt.Errorf("%w: bitmap bit beyond size %d", ErrMalformed, n)
		}
		b.words[bit/64] |= v << (bit % 64)
	}
	return b, nil
}
