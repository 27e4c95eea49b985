package slurmproto

import "fmt"

// GresMagic is GRES_MAGIC, the first word of every GRES record.
const GresMagic uint32 = 0x438a34d4

// GresConfRecord is one gres_slurmd_conf_t as gres_node_config_pack sends
// it in a node's registration (the same layout in 22.05, 24.11 and 26.05;
// only the meaning of some ConfigFlags bits moved, see pkg/gres.Flags.Bits).
// File is not sent: slurmctld learns only counts, types, Cores and Links.
type GresConfRecord struct {
	Count       uint64
	CPUCnt      uint32
	ConfigFlags uint32 // GRES_CONF_* of the release
	PluginID    uint32 // gres_build_id(Name)
	CPUs        string // Cores= as written; "" NULL
	Links       string
	Name        string
	Type        string
	UniqueID    string
}

// PackGresNodeConfig packs the gres_info of MESSAGE_NODE_REGISTRATION_STATUS
// for release v: u16 v, u16 record count, then per record u32 magic,
// u64 count, u32 cpu_cnt, u32 config_flags, u32 plugin_id, str cpus,
// str links, str name, str type_name, str unique_id. No records gives
// the 4 bytes every GRES-less node sends.
func PackGresNodeConfig(v uint16, recs []GresConfRecord) []byte {
	p := NewPacker(4 + 64*len(recs))
	p.U16(v)
	p.U16(uint16(len(recs)))
	for _, r := range recs {
		p.U32(GresMagic)
		p.U64(r.Count)
		p.U32(r.CPUCnt)
		p.U32(r.ConfigFlags)
		p.U32(r.PluginID)
		p.Str(r.CPUs)
		p.Str(r.Links)
		p.Str(r.Name)
		p.Str(r.Type)
		p.Str(r.UniqueID)
	}
	return p.Bytes()
}

// gresRecordMin is the smallest packed record (five NULL strings).
const gresRecordMin = 4 + 8 + 4 + 4 + 4 + 5*4

// UnpackGresNodeConfig reads a gres_info blob as slurmctld's
// gres_node_config_unpack does; it returns the version it was packed at.
func UnpackGresNodeConfig(b []byte) (uint16, []GresConfRecord, error) {
	u := NewUnpacker(b)
	v, _ := u.U16()
	n16, err := u.U16()
	if err != nil {
		return 0, nil, err
	}
	n, err := u.CheckCount("gres records", uint32(n16), gresRecordMin)
	if err != nil {
		return 0, nil, err
	}
	recs := make([]GresConfRecord, n)
	for i := range recs {
		r := &recs[i]
		magic, err := u.U32()
		if err != nil {
			return 0, nil, err
		}
		if magic != GresMagic {
			return 0, nil, u.Fail(fmt.Errorf("%w: gres record %d magic %#x", ErrMalformed, i, magic))
		}
		r.Count, _ = u.U64()
		r.CPUCnt, _ = u.U32()
		r.ConfigFlags, _ = u.U32()
		r.PluginID, _ = u.U32()
		r.CPUs, _ = u.Str()
		r.Links, _ = u.Str()
		r.Name, _ = u.Str()
		r.Type, _ = u.Str()
		r.UniqueID, _ = u.Str()
	}
	if err := u.Done(); err != nil {
		return 0, nil, err
	}
	return v, recs, nil
}
