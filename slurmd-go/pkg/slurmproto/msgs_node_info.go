package slurmproto

import "fmt"

// NodeInfoSingle is REQUEST_NODE_INFO_SINGLE (node_info_single_msg_t), what
// `scontrol show node <name>` sends: the node daemon reads its own node's
// state and reason before it lifts a drain, so that it lifts only its own.
// The same layout in 22.05, 24.11 and 26.05.
type NodeInfoSingle struct {
	NodeName  string
	ShowFlags uint16
}

// MsgType implements Body.
func (NodeInfoSingle) MsgType() MsgType { return RequestNodeInfoSingle }

// NodeInfo is RESPONSE_NODE_INFO (node_info_msg_t) as slurmctld answers
// REQUEST_NODE_INFO_SINGLE: at most one node record. Only the record's
// leading members up to its reason are decoded (what the daemon reads);
// the rest of the record is kept as it came, so that the body re-encodes
// byte for byte. A reply with more records is refused: splitting them
// needs the record's whole layout.
type NodeInfo struct {
	LastUpdate int64
	// Hidden is 24.11's hidden_nodes (pack_bit_str_hex; nil: none): a set
	// bit's record is not sent. Records is then still 1 and Node nil.
	Hidden  *Bitmap
	Records uint32      // record_count: 0 or 1
	Node    *NodeRecord // nil: no such node, or hidden
}

// NodeRecord is the decoded head of one node_info_t record.
type NodeRecord struct {
	Name      string
	NodeState uint32
	ReasonUID uint32
	Gres      string
	GresUsed  string
	Reason    string
	// Head is the record from its first byte up to the reason, Tail what
	// follows the reason (energy, TRES, reservation...), both verbatim.
	Head, Tail []byte
}

// MsgType implements Body.
func (NodeInfo) MsgType() MsgType { return ResponseNodeInfo }

// Select plugin ids (select_plugin_type) whose node info the 22.05 and
// 24.11 records carry: cons_res (mapped to cons_tres since 23.11) and
// cons_tres pack the same members.
const (
	selectPluginConsRes  uint32 = 101
	selectPluginConsTres uint32 = 109
)

func init() {
	RegisterBody(RequestNodeInfoSingle, typedCodec(spoken,
		func(p *Packer, _ uint16, m *NodeInfoSingle) error {
			p.Str(m.NodeName)
			p.U16(m.ShowFlags)
			return nil
		},
		func(u *Unpacker, _ uint16, _ MsgType, m *NodeInfoSingle) error {
			m.NodeName, _ = u.Str()
			m.ShowFlags, _ = u.U16()
			return nil
		}))
	RegisterBody(ResponseNodeInfo, typedCodec(spoken, packNodeInfo, unpackNodeInfo))
}

func packNodeInfo(p *Packer, v uint16, m *NodeInfo) error {
	p.U32(m.Records)
	p.TimeUnix(m.LastUpdate)
	if v >= Version2411 {
		p.Bitmap(m.Hidden)
	}
	if m.Node == nil {
		return nil
	}
	p.Raw(m.Node.Head)
	p.Str(m.Node.Reason)
	p.Raw(m.Node.Tail)
	return nil
}

func unpackNodeInfo(u *Unpacker, v uint16, _ MsgType, m *NodeInfo) error {
	n, err := u.U32()
	if err != nil {
		return err
	}
	m.Records = n
	m.LastUpdate, _ = u.TimeUnix()
	if v >= Version2411 {
		m.Hidden, _ = u.Bitmap()
	}
	switch {
	case n > 1:
		return u.Fail(fmt.Errorf("%w: node info with %d records: only a single node's reply is read", ErrMalformed, n))
	case n == 0 || (m.Hidden != nil && m.Hidden.Len() > 0 && m.Hidden.Test(0)):
		return u.Err()
	}
	start := u.Offset()
	r := &NodeRecord{}
	if err := unpackNodeRecordHead(u, v, r); err != nil {
		return err
	}
	r.Head = append([]byte(nil), u.b[start:u.Offset()]...)
	r.Reason, _ = u.Str()
	if u.Err() != nil {
		return u.Err()
	}
	r.Tail, _ = u.Raw(u.Remaining())
	r.Tail = append([]byte(nil), r.Tail...)
	m.Node = r
	return u.Err()
}

// unpackNodeRecordHead reads _unpack_node_info_members of release v up to,
// not including, the reason.
func unpackNodeRecordHead(u *Unpacker, v uint16, r *NodeRecord) error {
	str := func() { _, _ = u.Str() }
	u16 := func() { _, _ = u.U16() }
	u32 := func() { _, _ = u.U32() }
	u64 := func() { _, _ = u.U64() }

	r.Name, _ = u.Str()
	str() // node_hostname
	str() // node_addr
	str() // bcast_address
	if v >= Version2605 {
		u16() // cert_flags
	}
	u16() // port
	u32() // next_state
	r.NodeState, _ = u.U32()
	str() // version
	for range 5 {
		u16() // cpus, boards, sockets, cores, threads
	}
	u64() // real_memory
	u32() // tmp_disk
	if v >= Version2411 {
		str() // gpu_spec
	}
	str() // mcs_label
	u32() // owner
	u16() // core_spec_cnt
	u32() // cpu_bind
	u64() // mem_spec_limit
	str() // cpu_spec_list
	u16() // cpus_efctv
	u32() // cpu_load
	u64() // free_mem
	u32() // weight
	if v >= Version2411 {
		u16() // res_cores_per_gpu
	}
	r.ReasonUID, _ = u.U32()
	if v >= Version2605 {
		u32() // suspend_time
	}
	u64() // boot_time
	u64() // last_busy
	u64() // reason_time
	if v >= Version2411 {
		u64() // resume_after
	}
	u64() // slurmd_start_time
	if v >= Version2605 {
		u64() // cert_last_renewal
		u16() // alloc_cpus
		u64() // alloc_memory
		str() // alloc_tres_fmt_str
	} else {
		plugin, err := u.U32()
		if err != nil {
			return err
		}
		if plugin != selectPluginConsTres && plugin != selectPluginConsRes {
			return u.Fail(fmt.Errorf("%w: node info of select plugin %d: only cons_tres and cons_res are read", ErrMalformed, plugin))
		}
		u16() // alloc_cpus
		u64() // alloc_memory
		str() // tres_alloc_fmt_str
		u64() // tres_alloc_weighted (packdouble)
	}
	str() // arch
	str() // features
	str() // features_act
	r.Gres, _ = u.Str()
	str() // gres_drain
	r.GresUsed, _ = u.Str()
	str() // os
	str() // comment
	str() // extra
	if v >= Version2411 {
		str() // instance_id
		str() // instance_type
	}
	if v >= Version2605 {
		str() // parameters
	}
	return u.Err()
}
