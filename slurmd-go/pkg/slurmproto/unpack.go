package slurmproto

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Unpacker reads Slurm-encoded values from a byte slice. Every read is
// bounds-checked; the first error is sticky (later reads return zero values
// and the same error), so a decoder may read a run of fields and check Err
// once. No read allocates more than the remaining input can justify.
// Not safe for concurrent use.
type Unpacker struct {
	b   []byte
	off int
	err error
}

// NewUnpacker returns an Unpacker reading b. b is not copied; Raw and
// RawAt return sub-slices of it.
func NewUnpacker(b []byte) *Unpacker { return &Unpacker{b: b} }

// Err returns the first error encountered, or nil.
func (u *Unpacker) Err() error { return u.err }

// Offset returns the number of bytes consumed.
func (u *Unpacker) Offset() int { return u.off }

// Remaining returns the number of unread bytes.
func (u *Unpacker) Remaining() int { return len(u.b) - u.off }

// Done returns an error if the input was not consumed exactly (the Slurm
// decoders were all verified to consume their message exactly).
func (u *Unpacker) Done() error {
	if u.err != nil {
		return u.err
	}
	if r := u.Remaining(); r != 0 {
		u.err = fmt.Errorf("%w: %d trailing bytes at offset %d", ErrMalformed, r, u.off)
	}
	return u.err
}

// Fail records err (if none is recorded yet) and returns the sticky error.
// Body decoders use it for semantic checks.
func (u *Unpacker) Fail(err error) error {
	if u.err == nil {
		u.err = err
	}
	return u.err
}

// take returns the next n bytes or records ErrShortBuffer.
func (u *Unpacker) take(n int, what string) []byte {
	if u.err != nil {
		return nil
	}
	if n < 0 || n > len(u.b)-u.off {
		u.err = fmt.Errorf("%w: %s needs %d bytes at offset %d, %d left",
			ErrShortBuffer, what, n, u.off, len(u.b)-u.off)
		return nil
	}
	s := u.b[u.off : u.off+n : u.off+n]
	u.off += n
	return s
}

// U8 reads one byte.
func (u *Unpacker) U8() (uint8, error) {
	b := u.take(1, "u8")
	if b == nil {
		return 0, u.err
	}
	return b[0], nil
}

// Bool reads one byte; any non-zero value is true, as in C.
func (u *Unpacker) Bool() (bool, error) {
	v, err := u.U8()
	return v != 0, err
}

// U16 reads a big-endian uint16.
func (u *Unpacker) U16() (uint16, error) {
	b := u.take(2, "u16")
	if b == nil {
		return 0, u.err
	}
	return binary.BigEndian.Uint16(b), nil
}

// U32 reads a big-endian uint32.
func (u *Unpacker) U32() (uint32, error) {
	b := u.take(4, "u32")
	if b == nil {
		return 0, u.err
	}
	return binary.BigEndian.Uint32(b), nil
}

// U64 reads a big-endian uint64.
func (u *Unpacker) U64() (uint64, error) {
	b := u.take(8, "u64")
	if b == nil {
		return 0, u.err
	}
	return binary.BigEndian.Uint64(b), nil
}

// TimeUnix reads a pack_time value (signed int64 seconds).
func (u *Unpacker) TimeUnix() (int64, error) {
	v, err := u.U64()
	return int64(v), err
}

// Time reads a pack_time value; 0 decodes as the zero time.Time so that it
// re-packs as 0.
func (u *Unpacker) Time() (time.Time, error) {
	v, err := u.TimeUnix()
	if err != nil || v == 0 {
		return time.Time{}, err
	}
	return time.Unix(v, 0), nil
}

// Double reads a packdouble value (IEEE bits of val*1e6) and divides by 1e6.
func (u *Unpacker) Double() (float64, error) {
	v, err := u.U64()
	return math.Float64frombits(v) / floatMult, err
}

// Float reads a packfloat value.
func (u *Unpacker) Float() (float32, error) {
	v, err := u.U32()
	return math.Float32frombits(v) / floatMult, err
}

// memLen reads a packmem length and checks it against MaxPackMemLen and the
// remaining input before anything is allocated.
func (u *Unpacker) memLen(what string) (int, error) {
	n, err := u.U32()
	if err != nil {
		return 0, err
	}
	if n > MaxPackMemLen {
		return 0, u.Fail(fmt.Errorf("%w: %s length %d exceeds %d at offset %d",
			ErrTooLarge, what, n, MaxPackMemLen, u.off-4))
	}
	if int64(n) > int64(u.Remaining()) {
		return 0, u.Fail(fmt.Errorf("%w: %s length %d at offset %d, %d left",
			ErrShortBuffer, what, n, u.off-4, u.Remaining()))
	}
	return int(n), nil
}

// Mem reads a packmem value and returns a copy. Length 0 yields nil (C NULL).
func (u *Unpacker) Mem() ([]byte, error) {
	n, err := u.memLen("mem")
	if err != nil || n == 0 {
		return nil, err
	}
	return append([]byte(nil), u.take(n, "mem")...), nil
}

// Raw returns the next n bytes without copying (packbuf counterpart).
func (u *Unpacker) Raw(n int) ([]byte, error) {
	b := u.take(n, "raw")
	return b, u.err
}

// Str reads a packstr value: u32 0 → "" (NULL); u32 1 + NUL → EmptyString;
// otherwise the bytes before the trailing NUL. A string whose last byte is
// not NUL is rejected: Slurm never sends one and C would read past it.
func (u *Unpacker) Str() (string, error) {
	n, err := u.memLen("string")
	if err != nil || n == 0 {
		return "", err
	}
	b := u.take(n, "string")
	if b[n-1] != 0 {
		return "", u.Fail(fmt.Errorf("%w: string at offset %d is not NUL-terminated",
			ErrMalformed, u.off-n-4))
	}
	if n == 1 {
		return EmptyString, nil
	}
	return string(b[:n-1]), nil
}

// count reads a u32 element count and checks that count*minElem bytes
// remain, so that a forged count cannot force a large allocation.
func (u *Unpacker) count(what string, minElem int) (int, error) {
	n, err := u.U32()
	if err != nil {
		return 0, err
	}
	return u.checkCount(what, n, minElem)
}

// checkCount is count for a value already read.
func (u *Unpacker) checkCount(what string, n uint32, minElem int) (int, error) {
	if minElem < 1 {
		minElem = 1
	}
	if int64(n)*int64(minElem) > int64(u.Remaining()) {
		if n > MaxPackMemLen {
			return 0, u.Fail(fmt.Errorf("%w: %s count %d at offset %d",
				ErrTooLarge, what, n, u.off))
		}
		return 0, u.Fail(fmt.Errorf("%w: %s count %d needs at least %d bytes at offset %d, %d left",
			ErrShortBuffer, what, n, int64(n)*int64(minElem), u.off, u.Remaining()))
	}
	return int(n), nil
}

// Count reads a u32 element count for a hand-written loop whose elements
// are at least minElem bytes each, bounds-checked like the array readers.
func (u *Unpacker) Count(what string, minElem int) (int, error) {
	return u.count(what, minElem)
}

// CheckCount validates an already-read count like Count does.
func (u *Unpacker) CheckCount(what string, n uint32, minElem int) (int, error) {
	return u.checkCount(what, n, minElem)
}

// StrArray reads a packstr_array. Count 0 yields nil.
func (u *Unpacker) StrArray() ([]string, error) {
	n, err := u.count("string array", 4)
	if err != nil || n == 0 {
		return nil, err
	}
	a := make([]string, n)
	for i := range a {
		if a[i], err = u.Str(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// U16Array reads a pack16_array. Count 0 yields nil.
func (u *Unpacker) U16Array() ([]uint16, error) {
	n, err := u.count("u16 array", 2)
	if err != nil || n == 0 {
		return nil, err
	}
	a := make([]uint16, n)
	for i := range a {
		a[i], _ = u.U16()
	}
	return a, u.err
}

// U32Array reads a pack32_array. Count 0 yields nil.
func (u *Unpacker) U32Array() ([]uint32, error) {
	n, err := u.count("u32 array", 4)
	if err != nil || n == 0 {
		return nil, err
	}
	a := make([]uint32, n)
	for i := range a {
		a[i], _ = u.U32()
	}
	return a, u.err
}

// U64Array reads a pack64_array. Count 0 yields nil.
func (u *Unpacker) U64Array() ([]uint64, error) {
	n, err := u.count("u64 array", 8)
	if err != nil || n == 0 {
		return nil, err
	}
	a := make([]uint64, n)
	for i := range a {
		a[i], _ = u.U64()
	}
	return a, u.err
}

// ListLen reads a slurm_pack_list count: NoVal means a NULL list (isNil).
// minElem bounds the count against the remaining input.
func (u *Unpacker) ListLen(minElem int) (n int, isNil bool, err error) {
	c, err := u.U32()
	if err != nil {
		return 0, false, err
	}
	if c == NoVal {
		return 0, true, nil
	}
	n, err = u.checkCount("list", c, minElem)
	return n, false, err
}

// Bitmap reads a pack_bit_str_hex value. u32 NoVal yields nil. Real Slurm
// always sends ceil(nbits/4) hex digits; fewer digits than needed to cover
// nbits is rejected so nbits cannot force a large allocation.
func (u *Unpacker) Bitmap() (*Bitmap, error) {
	start := u.off
	nbits, err := u.U32()
	if err != nil {
		return nil, err
	}
	if nbits == NoVal {
		return nil, nil
	}
	s, err := u.Str()
	if err != nil {
		return nil, err
	}
	b, perr := ParseHexMask(int(nbits), CString(s))
	if perr != nil {
		return nil, u.Fail(fmt.Errorf("%w (bitmap at offset %d)", perr, start))
	}
	return b, nil
}

// Addr reads a slurm_addr_t, see Addr.
func (u *Unpacker) Addr() (Addr, error) { return unpackAddr(u) }

// StepID reads a slurm_step_id_t at version v (see Packer.StepID).
func (u *Unpacker) StepID(v uint16) (StepID, error) {
	var s StepID
	if v >= Version2411 {
		s.SLUID, _ = u.U64()
	}
	s.JobID, _ = u.U32()
	s.StepID, _ = u.U32()
	s.StepHetComp, _ = u.U32()
	return s, u.err
}
