package gresbind

import "github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"

// bits is a bitstr_t of a fixed size; nil stands for C's NULL bitmap.
type bits []bool

func newBits(n int) bits { return make(bits, n) }

func fromBitmap(b *slurmproto.Bitmap) bits {
	if b == nil {
		return nil
	}
	out := newBits(b.Len())
	for i := range out {
		out[i] = b.Test(i)
	}
	return out
}

func (b bits) test(i int) bool { return i >= 0 && i < len(b) && b[i] }

func (b bits) set(i int) {
	if i >= 0 && i < len(b) {
		b[i] = true
	}
}

func (b bits) count() int {
	c := 0
	for _, v := range b {
		if v {
			c++
		}
	}
	return c
}

// ffs is bit_ffs: the first set bit, -1 when none.
func (b bits) ffs() int {
	for i, v := range b {
		if v {
			return i
		}
	}
	return -1
}

// nth is bit_get_bit_num: the position of the n-th (0-based) set bit.
func (b bits) nth(n int) int {
	for i, v := range b {
		if v {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

func (b bits) clone() bits {
	if b == nil {
		return nil
	}
	return append(bits(nil), b...)
}

// and is bit_and(b, o): bits past o's size are cleared.
func (b bits) and(o bits) {
	for i := range b {
		b[i] = b[i] && o.test(i)
	}
}

// consolidate is bit_consolidate: the set bits moved to the lowest positions.
func (b bits) consolidate() {
	c := b.count()
	for i := range b {
		b[i] = i < c
	}
}

// or is bit_or into b (sized by b).
func (b bits) or(o bits) {
	for i := range b {
		b[i] = b[i] || o.test(i)
	}
}

// alloc is one plugin's accumulated allocation on this node
// (_accumulate_job_gres_alloc / _accumulate_step_gres_alloc).
type alloc struct {
	bits   bits     // gres_bit_alloc; nil when none
	cnt    uint64   // gres_cnt_node_alloc
	perBit []uint64 // 24.11 gres_per_bit_alloc (shard/mps), nil when none
	found  bool     // the list has a record of this plugin
}

func (a *alloc) add(b *slurmproto.Bitmap, cnt uint64, perBit []uint64) {
	a.found = true
	if b != nil {
		if a.bits == nil {
			a.bits = newBits(b.Len())
		}
		a.bits.or(fromBitmap(b))
	}
	a.cnt += cnt
	if perBit != nil && b != nil {
		if a.perBit == nil {
			a.perBit = make([]uint64, b.Len())
		}
		for i := 0; i < len(a.perBit) && i < len(perBit); i++ {
			a.perBit[i] += perBit[i]
		}
	}
}

// jobAlloc accumulates the job records of plugin id at job node index node.
func jobAlloc(recs []slurmproto.GresJobState, node int, id uint32) alloc {
	var a alloc
	for i := range recs {
		r := &recs[i]
		if r.PluginID != id || node < 0 || node >= int(r.NodeCnt) {
			continue
		}
		a.add(bitmapAt(r.BitAlloc, node), u64At(r.CntNodeAlloc, node), perBitAt(r.PerBitAlloc, node))
	}
	return a
}

// stepAlloc accumulates the step records of plugin id at job node index
// node (get_cred_gres extracts both lists at the job's host index).
func stepAlloc(recs []slurmproto.GresStepState, node int, id uint32) alloc {
	var a alloc
	for i := range recs {
		r := &recs[i]
		if r.PluginID != id || node < 0 {
			continue
		}
		var b *slurmproto.Bitmap
		if node < int(r.NodeCnt) {
			b = bitmapAt(r.BitAlloc, node)
		}
		a.add(b, u64At(r.CntNodeAlloc, node), perBitAt(r.PerBitAlloc, node))
	}
	return a
}

func bitmapAt(bs []*slurmproto.Bitmap, i int) *slurmproto.Bitmap {
	if i < len(bs) {
		return bs[i]
	}
	return nil
}

func u64At(a []uint64, i int) uint64 {
	if i < len(a) {
		return a[i]
	}
	return 0
}

func perBitAt(a [][]uint64, i int) []uint64 {
	if i < len(a) {
		return a[i]
	}
	return nil
}
