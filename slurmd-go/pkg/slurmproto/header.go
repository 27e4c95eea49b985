package slurmproto

import "fmt"

// Forward is the header's forward_struct: the nodes the receiver must relay
// the message to (slurm_protocol_pack.c pack_header).
type Forward struct {
	Count     uint16 // forward.cnt; 0 means no forwarding and no further fields
	Nodes     string // ranged hostlist, e.g. "n[3-5]"
	TimeoutMS uint32
	TreeWidth uint16
	// NetCred is forward.alias_addrs.net_cred, present from 23.11 when the
	// header has FlagPackAddrs (cloud nodes' addresses, signed by ctld).
	NetCred string
	// TreeDepth (24.11+) is how deep in the fan-out tree the receiver is.
	TreeDepth uint16
}

// RetEntry is one ret_list entry of an aggregated (forwarded) reply:
// u32 err, u16 msg_type, str node_name, then the body of msg_type with no
// length prefix.
type RetEntry struct {
	Err      uint32
	MsgType  MsgType
	NodeName string
	// Body is the exact packed body of MsgType (empty for
	// RESPONSE_FORWARD_FAILED). Decode it with DecodeBody(version, MsgType, Body).
	Body []byte
}

// Header is the Slurm message header (header_t).
type Header struct {
	Version uint16
	Flags   uint16
	// MsgIndex exists only in the 20.11/21.08 layout (Version < 0x2600);
	// Slurm always sends 0 and ignores it on receive.
	MsgIndex   uint16
	MsgType    MsgType
	BodyLength uint32
	Forward    Forward
	RetList    []RetEntry
	OrigAddr   Addr
}

// EncodeHeader packs h. BodyLength is packed as given.
func EncodeHeader(h Header) []byte {
	p := NewPacker(64)
	PackHeader(p, h)
	return p.Bytes()
}

// PackHeader appends the packed header to p. Versions below 0x2600 get the
// extra u16 msg_index after flags; 23.11+ packs the forward block's net
// credential when FlagPackAddrs is set, and 24.11+ its tree depth. The
// ret_list count is len(h.RetList).
func PackHeader(p *Packer, h Header) {
	p.U16(h.Version)
	p.U16(h.Flags)
	if h.Version < Version2205 {
		p.U16(h.MsgIndex)
	}
	p.U16(uint16(h.MsgType))
	p.U32(h.BodyLength)
	p.U16(h.Forward.Count)
	if h.Forward.Count > 0 {
		p.Str(h.Forward.Nodes)
		p.U32(h.Forward.TimeoutMS)
		p.U16(h.Forward.TreeWidth)
		if h.Version >= Version2311 && h.Flags&FlagPackAddrs != 0 {
			p.Str(h.Forward.NetCred)
		}
		if h.Version >= Version2411 {
			p.U16(h.Forward.TreeDepth)
		}
	}
	p.U16(uint16(len(h.RetList)))
	for _, e := range h.RetList {
		p.U32(e.Err)
		p.U16(uint16(e.MsgType))
		p.Str(e.NodeName)
		p.Raw(e.Body)
	}
	p.Addr(h.OrigAddr)
}

// DecodeHeader reads a header from u. On an unsupported version it returns
// the header with only Version set and an error wrapping
// ErrUnsupportedVersion, so the caller can answer with
// SLURM_PROTOCOL_VERSION_ERROR. ret_list entry bodies are delimited with the
// body registry; an entry of an unregistered type fails with
// ErrUnknownMsgType, as in Slurm.
func DecodeHeader(u *Unpacker) (Header, error) {
	var h Header
	var err error
	if h.Version, err = u.U16(); err != nil {
		return h, wrap("header", err)
	}
	if !ValidVersion(h.Version) {
		return h, fmt.Errorf("%w: header version 0x%04x", ErrUnsupportedVersion, h.Version)
	}
	h.Flags, _ = u.U16()
	if h.Version < Version2205 {
		h.MsgIndex, _ = u.U16()
	}
	t, _ := u.U16()
	h.MsgType = MsgType(t)
	h.BodyLength, _ = u.U32()
	h.Forward.Count, _ = u.U16()
	if h.Forward.Count > 0 {
		h.Forward.Nodes, _ = u.Str()
		h.Forward.TimeoutMS, _ = u.U32()
		h.Forward.TreeWidth, _ = u.U16()
		if h.Version >= Version2311 && h.Flags&FlagPackAddrs != 0 {
			h.Forward.NetCred, _ = u.Str()
		}
		if h.Version >= Version2411 {
			h.Forward.TreeDepth, _ = u.U16()
		}
	}
	retCnt, err := u.U16()
	if err != nil {
		return h, wrap("header", err)
	}
	// Each entry is at least 10 bytes (err, type, NULL name).
	if _, err := u.CheckCount("ret_list", uint32(retCnt), 10); err != nil {
		return h, wrap("header", err)
	}
	if retCnt > 0 {
		h.RetList = make([]RetEntry, 0, retCnt)
	}
	for i := 0; i < int(retCnt); i++ {
		e, err := decodeRetEntry(u, h.Version)
		if err != nil {
			return h, wrap(fmt.Sprintf("header ret_list entry %d", i), err)
		}
		h.RetList = append(h.RetList, e)
	}
	if h.OrigAddr, err = u.Addr(); err != nil {
		return h, wrap("header", err)
	}
	return h, nil
}

func decodeRetEntry(u *Unpacker, version uint16) (RetEntry, error) {
	var e RetEntry
	e.Err, _ = u.U32()
	t, _ := u.U16()
	e.MsgType = MsgType(t)
	name, err := u.Str()
	if err != nil {
		return e, err
	}
	e.NodeName = name
	rest := u.b[u.off:]
	_, n, err := DecodeBodyPrefix(version, e.MsgType, rest)
	if err != nil {
		return e, u.Fail(err)
	}
	body, _ := u.Raw(n)
	if e.MsgType == ResponseSlurmRCMsg {
		// Slurm's unpack_msg turns RESPONSE_SLURM_RC_MSG into
		// RESPONSE_SLURM_RC and drops the text, so a forwarder re-emits
		// only the rc.
		e.MsgType = ResponseSlurmRC
		body = body[:4]
	}
	e.Body = body
	return e, nil
}

// NewRetEntry builds the ret_list entry a forwarder records for a reply it
// received from node (the reply's own body, not its ret_list), applying
// Slurm's RESPONSE_SLURM_RC_MSG → RESPONSE_SLURM_RC rewrite.
func NewRetEntry(node string, errCode uint32, t MsgType, body []byte) RetEntry {
	if t == ResponseSlurmRCMsg && len(body) >= 4 {
		t, body = ResponseSlurmRC, body[:4]
	}
	return RetEntry{Err: errCode, MsgType: t, NodeName: node, Body: body}
}

// ForwardFailed returns the RESPONSE_FORWARD_FAILED entry Slurm records for
// a node it could not reach (mark_as_failed_forward): no body.
func ForwardFailed(node string, errCode uint32) RetEntry {
	return RetEntry{Err: errCode, MsgType: ResponseForwardFailed, NodeName: node}
}
