package slurmproto

import (
	"encoding/binary"
	"math"
	"time"
)

// floatMult is Slurm's FLOAT_MULT: packdouble sends the IEEE bits of val*1e6.
const floatMult = 1000000

// EmptyString is the Go value of a wire string that is present but empty
// (u32 1 + NUL). The Go empty string "" means a NULL string (u32 0). See doc.go.
const EmptyString = "\x00"

// CString maps a decoded wire string to what C code would see: both NULL and
// EmptyString become "". Use it for display and comparisons.
func CString(s string) string {
	if s == EmptyString {
		return ""
	}
	return s
}

// Packer appends Slurm-encoded values to a byte slice. The zero value is
// ready to use. Not safe for concurrent use.
type Packer struct {
	buf []byte
}

// NewPacker returns a Packer with capacity for n bytes.
func NewPacker(n int) *Packer { return &Packer{buf: make([]byte, 0, n)} }

// Bytes returns the packed bytes (aliasing the Packer's buffer).
func (p *Packer) Bytes() []byte { return p.buf }

// Len returns the number of bytes packed so far.
func (p *Packer) Len() int { return len(p.buf) }

// U8 packs one byte (pack8).
func (p *Packer) U8(v uint8) { p.buf = append(p.buf, v) }

// Bool packs a bool as one byte 0/1 (packbool).
func (p *Packer) Bool(v bool) {
	if v {
		p.U8(1)
	} else {
		p.U8(0)
	}
}

// U16 packs a big-endian uint16 (pack16).
func (p *Packer) U16(v uint16) { p.buf = binary.BigEndian.AppendUint16(p.buf, v) }

// U32 packs a big-endian uint32 (pack32).
func (p *Packer) U32(v uint32) { p.buf = binary.BigEndian.AppendUint32(p.buf, v) }

// U64 packs a big-endian uint64 (pack64).
func (p *Packer) U64(v uint64) { p.buf = binary.BigEndian.AppendUint64(p.buf, v) }

// TimeUnix packs a time_t as a signed big-endian int64 (pack_time).
func (p *Packer) TimeUnix(sec int64) { p.U64(uint64(sec)) }

// Time packs t as pack_time. The zero time.Time packs as 0 so that unset
// fields mean "never", as in C.
func (p *Packer) Time(t time.Time) {
	if t.IsZero() {
		p.TimeUnix(0)
		return
	}
	p.TimeUnix(t.Unix())
}

// Double packs the IEEE-754 bits of v*1e6 (packdouble).
func (p *Packer) Double(v float64) { p.U64(math.Float64bits(v * floatMult)) }

// Float packs the IEEE-754 float32 bits of v*1e6 (packfloat).
func (p *Packer) Float(v float32) { p.U32(math.Float32bits(v * floatMult)) }

// Mem packs a u32 length followed by the bytes (packmem). A nil or empty
// slice packs as length 0.
func (p *Packer) Mem(b []byte) {
	p.U32(uint32(len(b)))
	p.buf = append(p.buf, b...)
}

// Raw appends bytes with no length (packbuf).
func (p *Packer) Raw(b []byte) { p.buf = append(p.buf, b...) }

// Str packs a string the way packstr does: "" (NULL) → u32 0;
// EmptyString → u32 1 + NUL; otherwise u32 len+1, bytes, NUL.
func (p *Packer) Str(s string) {
	switch s {
	case "":
		p.U32(0)
	case EmptyString:
		p.U32(1)
		p.U8(0)
	default:
		p.U32(uint32(len(s) + 1))
		p.buf = append(p.buf, s...)
		p.U8(0)
	}
}

// StrArray packs u32 n followed by n strings (packstr_array). A nil slice
// packs as count 0, like C's NULL array.
func (p *Packer) StrArray(a []string) {
	p.U32(uint32(len(a)))
	for _, s := range a {
		p.Str(s)
	}
}

// U16Array packs u32 n followed by n u16 (pack16_array).
func (p *Packer) U16Array(a []uint16) {
	p.U32(uint32(len(a)))
	for _, v := range a {
		p.U16(v)
	}
}

// U32Array packs u32 n followed by n u32 (pack32_array).
func (p *Packer) U32Array(a []uint32) {
	p.U32(uint32(len(a)))
	for _, v := range a {
		p.U32(v)
	}
}

// U64Array packs u32 n followed by n u64 (pack64_array).
func (p *Packer) U64Array(a []uint64) {
	p.U32(uint32(len(a)))
	for _, v := range a {
		p.U64(v)
	}
}

// ListLen packs the count of a slurm_pack_list: NoVal for a nil list
// (C's NULL List), else n. The caller packs the elements.
func (p *Packer) ListLen(isNil bool, n int) {
	if isNil {
		p.U32(NoVal)
		return
	}
	p.U32(uint32(n))
}

// Bitmap packs a bitmap in hex form (pack_bit_str_hex): nil → u32 NoVal;
// else u32 nbits + str "0x<HEX>".
func (p *Packer) Bitmap(b *Bitmap) {
	if b == nil {
		p.U32(NoVal)
		return
	}
	p.U32(uint32(b.Len()))
	p.Str(b.HexMask())
}

// Addr packs a slurm_addr_t (slurm_pack_addr), see Addr.
func (p *Packer) Addr(a Addr) { a.pack(p) }

// StepID packs a slurm_step_id_t at version v: 24.11 put the 64-bit SLUID
// in front (24.11 daemons send 0, 26.05 fills it in).
func (p *Packer) StepID(v uint16, s StepID) {
	if v >= Version2411 {
		p.U64(s.SLUID)
	}
	p.U32(s.JobID)
	p.U32(s.StepID)
	p.U32(s.StepHetComp)
}
