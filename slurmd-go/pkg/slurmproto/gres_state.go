package slurmproto

import "fmt"

// GRES job and step state records of a job credential (gres_job_state_pack
// and gres_step_state_pack; 22.05 src/common/gres.c, 24.11 and 26.05
// src/interfaces/gres.c). One layout per spoken release:
//
//	job:  u32 magic, plugin_id; u16 cpus_per_gres, flags; u64 gres_per_job,
//	      gres_per_node, gres_per_socket, gres_per_task, mem_per_gres;
//	      u16 ntasks_per_gres; u64 total_gres; str type_name; u32 node_cnt;
//	      u8 [+arr64 gres_cnt_node_alloc]; u8 [+node_cnt bitstr gres_bit_alloc];
//	      24.11+: node_cnt × (u8 [+arr64 gres_per_bit_alloc]);
//	      u8 [+node_cnt bitstr gres_bit_step_alloc];
//	      u8 [+node_cnt u64 gres_cnt_step_alloc];
//	      24.11+: node_cnt × (u8 [+arr64 gres_per_bit_step_alloc])
//	step: u32 magic, plugin_id; u16 cpus_per_gres, flags; u64 gres_per_step,
//	      gres_per_node, gres_per_socket, gres_per_task, mem_per_gres,
//	      total_gres; 24.11+: str type_name; u32 node_cnt; bitstr node_in_use;
//	      u8 [+arr64 gres_cnt_node_alloc]; u8 [+node_cnt bitstr gres_bit_alloc];
//	      24.11+: node_cnt × (u8 [+arr64 gres_per_bit_alloc])
//
// The credential keeps the raw bytes (they are signed); these types are the
// decoded view of them, and EncodeGres*States packs them back byte for byte.
// The GRES name is not on the wire: PluginID is gres_build_id(name).

// GresJobState is one gres_job_state_t record.
type GresJobState struct {
	PluginID      uint32
	CPUsPerGres   uint16
	Flags         uint16
	GresPerJob    uint64
	GresPerNode   uint64
	GresPerSocket uint64
	GresPerTask   uint64
	MemPerGres    uint64
	NTasksPerGres uint16
	TotalGres     uint64
	TypeName      string
	NodeCnt       uint32
	// CntNodeAlloc: nil when absent (flag 0).
	CntNodeAlloc []uint64
	// BitAlloc: nil when absent; else NodeCnt entries (an entry nil for a
	// node without a bitmap, packed as u32 NO_VAL).
	BitAlloc []*Bitmap
	// PerBitAlloc (24.11+, shard/mps): NodeCnt entries, nil where the
	// node's flag is 0; the slice itself is nil in 22.05.
	PerBitAlloc     [][]uint64
	BitStepAlloc    []*Bitmap
	CntStepAlloc    []uint64
	PerBitStepAlloc [][]uint64
}

// GresStepState is one gres_step_state_t record.
type GresStepState struct {
	PluginID      uint32
	CPUsPerGres   uint16
	Flags         uint16
	GresPerStep   uint64
	GresPerNode   uint64
	GresPerSocket uint64
	GresPerTask   uint64
	MemPerGres    uint64
	TotalGres     uint64
	TypeName      string // 24.11+
	NodeCnt       uint32
	NodeInUse     *Bitmap
	CntNodeAlloc  []uint64
	BitAlloc      []*Bitmap
	PerBitAlloc   [][]uint64 // 24.11+
}

// GresBuildID is gres_build_id: the plugin id of a GRES name (its bytes
// added in, shifted by 0, 8, 16, 24 bits in turn).
func GresBuildID(name string) uint32 {
	var id uint32
	shift := uint(0)
	for i := 0; i < len(name); i++ {
		// C adds a (signed) char; names are ASCII.
		id += uint32(name[i]) << shift
		shift = (shift + 8) % 32
	}
	return id
}

// DecodeGresJobStates decodes a gres_job_state_pack list (u16 rec_cnt and
// the records) of release v, as Cred.GresJobState holds it.
func DecodeGresJobStates(raw []byte, v uint16) ([]GresJobState, error) {
	return decodeGresStates(raw, v, "gres job state", decodeGresJobState)
}

// DecodeGresStepStates decodes a gres_step_state_pack list of release v.
func DecodeGresStepStates(raw []byte, v uint16) ([]GresStepState, error) {
	return decodeGresStates(raw, v, "gres step state", decodeGresStepState)
}

func decodeGresStates[T any](raw []byte, v uint16, what string, dec func(*Unpacker, uint16) (T, error)) ([]T, error) {
	if raw == nil {
		return nil, nil
	}
	u := NewUnpacker(raw)
	n, err := u.U16()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	cnt, err := u.CheckCount(what+" records", uint32(n), 4)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]T, 0, cnt)
	for i := 0; i < cnt; i++ {
		magic, err := u.U32()
		if err != nil {
			return nil, fmt.Errorf("%s record %d: %w", what, i, err)
		}
		if magic != gresMagic {
			return nil, fmt.Errorf("%s record %d: %w: magic 0x%08x", what, i, ErrMalformed, magic)
		}
		r, err := dec(u, v)
		if err == nil {
			err = u.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("%s record %d: %w", what, i, err)
		}
		out = append(out, r)
	}
	if err := u.Done(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func decodeGresJobState(u *Unpacker, v uint16) (GresJobState, error) {
	var r GresJobState
	r.PluginID, _ = u.U32()
	r.CPUsPerGres, _ = u.U16()
	r.Flags, _ = u.U16()
	r.GresPerJob, _ = u.U64()
	r.GresPerNode, _ = u.U64()
	r.GresPerSocket, _ = u.U64()
	r.GresPerTask, _ = u.U64()
	r.MemPerGres, _ = u.U64()
	r.NTasksPerGres, _ = u.U16()
	r.TotalGres, _ = u.U64()
	r.TypeName, _ = u.Str()
	var err error
	if r.NodeCnt, err = gresNodeCnt(u); err != nil {
		return r, err
	}
	if r.CntNodeAlloc, err = optU64Array(u); err != nil {
		return r, err
	}
	if r.BitAlloc, err = optBitmaps(u, r.NodeCnt); err != nil {
		return r, err
	}
	if v >= Version2411 {
		if r.PerBitAlloc, err = perNodeArrays(u, r.NodeCnt); err != nil {
			return r, err
		}
	}
	if r.BitStepAlloc, err = optBitmaps(u, r.NodeCnt); err != nil {
		return r, err
	}
	has, err := u.U8()
	if err != nil {
		return r, err
	}
	if has != 0 {
		n, err := u.CheckCount("gres_cnt_step_alloc", r.NodeCnt, 8)
		if err != nil {
			return r, err
		}
		r.CntStepAlloc = make([]uint64, n)
		for i := range r.CntStepAlloc {
			r.CntStepAlloc[i], _ = u.U64()
		}
	}
	if v >= Version2411 {
		if r.PerBitStepAlloc, err = perNodeArrays(u, r.NodeCnt); err != nil {
			return r, err
		}
	}
	return r, u.Err()
}

func decodeGresStepState(u *Unpacker, v uint16) (GresStepState, error) {
	var r GresStepState
	r.PluginID, _ = u.U32()
	r.CPUsPerGres, _ = u.U16()
	r.Flags, _ = u.U16()
	r.GresPerStep, _ = u.U64()
	r.GresPerNode, _ = u.U64()
	r.GresPerSocket, _ = u.U64()
	r.GresPerTask, _ = u.U64()
	r.MemPerGres, _ = u.U64()
	r.TotalGres, _ = u.U64()
	if v >= Version2411 {
		r.TypeName, _ = u.Str()
	}
	var err error
	if r.NodeCnt, err = gresNodeCnt(u); err != nil {
		return r, err
	}
	if r.NodeInUse, err = u.Bitmap(); err != nil {
		return r, err
	}
	if r.CntNodeAlloc, err = optU64Array(u); err != nil {
		return r, err
	}
	if r.BitAlloc, err = optBitmaps(u, r.NodeCnt); err != nil {
		return r, err
	}
	if v >= Version2411 {
		if r.PerBitAlloc, err = perNodeArrays(u, r.NodeCnt); err != nil {
			return r, err
		}
	}
	return r, u.Err()
}

// optU64Array reads u8 flag [+ arr64]; nil when the flag is 0.
func optU64Array(u *Unpacker) ([]uint64, error) {
	has, err := u.U8()
	if err != nil || has == 0 {
		return nil, err
	}
	a, err := u.U64Array()
	if a == nil && err == nil {
		a = []uint64{}
	}
	return a, err
}

// optBitmaps reads u8 flag [+ nodeCnt bitmaps]; nil when the flag is 0.
func optBitmaps(u *Unpacker, nodeCnt uint32) ([]*Bitmap, error) {
	has, err := u.U8()
	if err != nil || has == 0 {
		return nil, err
	}
	n, err := u.CheckCount("gres bitmaps", nodeCnt, 4)
	if err != nil {
		return nil, err
	}
	out := make([]*Bitmap, n)
	for i := range out {
		if out[i], err = u.Bitmap(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// perNodeArrays reads nodeCnt × (u8 flag [+ arr64]).
func perNodeArrays(u *Unpacker, nodeCnt uint32) ([][]uint64, error) {
	n, err := u.CheckCount("gres per-bit arrays", nodeCnt, 1)
	if err != nil {
		return nil, err
	}
	out := make([][]uint64, n)
	for i := range out {
		if out[i], err = optU64Array(u); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// EncodeGresJobStates packs recs as gres_job_state_pack does for release v.
func EncodeGresJobStates(recs []GresJobState, v uint16) []byte {
	p := NewPacker(64)
	p.U16(uint16(len(recs)))
	for i := range recs {
		r := &recs[i]
		p.U32(gresMagic)
		p.U32(r.PluginID)
		p.U16(r.CPUsPerGres)
		p.U16(r.Flags)
		p.U64(r.GresPerJob)
		p.U64(r.GresPerNode)
		p.U64(r.GresPerSocket)
		p.U64(r.GresPerTask)
		p.U64(r.MemPerGres)
		p.U16(r.NTasksPerGres)
		p.U64(r.TotalGres)
		p.Str(r.TypeName)
		p.U32(r.NodeCnt)
		packOptU64Array(p, r.CntNodeAlloc)
		packOptBitmaps(p, r.BitAlloc, r.NodeCnt)
		if v >= Version2411 {
			packPerNodeArrays(p, r.PerBitAlloc, r.NodeCnt)
		}
		packOptBitmaps(p, r.BitStepAlloc, r.NodeCnt)
		if r.CntStepAlloc == nil {
			p.U8(0)
		} else {
			p.U8(1)
			for j := uint32(0); j < r.NodeCnt; j++ {
				p.U64(at(r.CntStepAlloc, j))
			}
		}
		if v >= Version2411 {
			packPerNodeArrays(p, r.PerBitStepAlloc, r.NodeCnt)
		}
	}
	return p.Bytes()
}

// EncodeGresStepStates packs recs as gres_step_state_pack does for release v.
func EncodeGresStepStates(recs []GresStepState, v uint16) []byte {
	p := NewPacker(64)
	p.U16(uint16(len(recs)))
	for i := range recs {
		r := &recs[i]
		p.U32(gresMagic)
		p.U32(r.PluginID)
		p.U16(r.CPUsPerGres)
		p.U16(r.Flags)
		p.U64(r.GresPerStep)
		p.U64(r.GresPerNode)
		p.U64(r.GresPerSocket)
		p.U64(r.GresPerTask)
		p.U64(r.MemPerGres)
		p.U64(r.TotalGres)
		if v >= Version2411 {
			p.Str(r.TypeName)
		}
		p.U32(r.NodeCnt)
		p.Bitmap(r.NodeInUse)
		packOptU64Array(p, r.CntNodeAlloc)
		packOptBitmaps(p, r.BitAlloc, r.NodeCnt)
		if v >= Version2411 {
			packPerNodeArrays(p, r.PerBitAlloc, r.NodeCnt)
		}
	}
	return p.Bytes()
}

func at(a []uint64, i uint32) uint64 {
	if int(i) < len(a) {
		return a[i]
	}
	return 0
}

func packOptU64Array(p *Packer, a []uint64) {
	if a == nil {
		p.U8(0)
		return
	}
	p.U8(1)
	p.U64Array(a)
}

func packOptBitmaps(p *Packer, bs []*Bitmap, nodeCnt uint32) {
	if bs == nil {
		p.U8(0)
		return
	}
	p.U8(1)
	for j := uint32(0); j < nodeCnt; j++ {
		var b *Bitmap
		if int(j) < len(bs) {
			b = bs[j]
		}
		p.Bitmap(b)
	}
}

func packPerNodeArrays(p *Packer, as [][]uint64, nodeCnt uint32) {
	for j := uint32(0); j < nodeCnt; j++ {
		var a []uint64
		if int(j) < len(as) {
			a = as[j]
		}
		packOptU64Array(p, a)
	}
}

// JobGres decodes c.GresJobState for release v.
func (c *Cred) JobGres(v uint16) ([]GresJobState, error) {
	return DecodeGresJobStates(c.GresJobState, v)
}

// StepGres decodes c.GresStepState for release v.
func (c *Cred) StepGres(v uint16) ([]GresStepState, error) {
	return DecodeGresStepStates(c.GresStepState, v)
}
