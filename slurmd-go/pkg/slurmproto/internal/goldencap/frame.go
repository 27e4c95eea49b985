package main

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Header facts of the releases slurmproto may not decode yet (24.11 and
// 26.05, src/common/slurm_protocol_pack.c pack_header and
// slurm_protocol_common.h). They are read here at their fixed places so that
// captures of every release can be cut and named.
const (
	version2311 uint16 = 0x2800 // forward.net_cred under flagPackAddrs
	version2411 uint16 = 0x2a00 // forward.tree_depth
	newestKnown uint16 = 0x2d00 // 26.05

	flagNoAuthCred uint16 = 0x0040 // SLURM_NO_AUTH_CRED: no auth block at all
	flagPackAddrs  uint16 = 0x0080 // SLURM_PACK_ADDRS
)

// plausibleVersion: a Slurm protocol version (minor byte 0) from 20.11 to 26.05.
func plausibleVersion(v uint16) bool {
	return slurmproto.ValidVersion(v) || (v&0xff == 0 && v >= slurmproto.MinVersion && v <= newestKnown)
}

// rawHeader is a frame's header, auth block and body as found at their
// places, without decoding the ret_list entries or the body.
type rawHeader struct {
	Version, Flags, MsgType uint16
	BodyLength              uint32
	FwdCnt                  uint16
	FwdNodes                string
	FwdTimeout              uint32
	TreeWidth               uint16
	NetCred                 string
	TreeDepth               uint16
	RetCnt                  uint16
	// RetAndOrig is the ret_list entries and orig_addr, undecoded.
	RetAndOrig []byte
	AuthPlugin uint32 // 0 when flagNoAuthCred is set
	AuthCred   string
	Body       []byte
}

var errNotFrame = errors.New("not a Slurm frame")

// rawParse reads frame (u32 length included) at the fixed places of its
// version's header. The auth block is the u32 plugin id plus the packstr that
// ends exactly where the body_length bytes of body begin; a frame whose
// length, header or auth block do not fit that is errNotFrame.
func rawParse(frame []byte) (*rawHeader, error) {
	if len(frame) < 4 || int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		return nil, fmt.Errorf("%w: length prefix does not match %d bytes", errNotFrame, len(frame))
	}
	r := &reader{b: frame[4:]}
	h := &rawHeader{}
	h.Version = r.u16()
	if !plausibleVersion(h.Version) {
		return nil, fmt.Errorf("%w: version 0x%04x", errNotFrame, h.Version)
	}
	h.Flags = r.u16()
	if h.Version < slurmproto.Version2205 {
		r.u16() // msg_index of 20.11/21.08
	}
	h.MsgType = r.u16()
	h.BodyLength = r.u32()
	h.FwdCnt = r.u16()
	if h.FwdCnt > 0 {
		h.FwdNodes = r.str()
		h.FwdTimeout = r.u32()
		h.TreeWidth = r.u16()
		if h.Version >= version2311 && h.Flags&flagPackAddrs != 0 {
			h.NetCred = r.str()
		}
		if h.Version >= version2411 {
			h.TreeDepth = r.u16()
		}
	}
	h.RetCnt = r.u16()
	if r.err != nil || uint64(h.BodyLength) > uint64(len(r.b)-r.off) {
		return nil, fmt.Errorf("%w: header does not fit", errNotFrame)
	}
	bodyAt := len(r.b) - int(h.BodyLength)
	h.Body = r.b[bodyAt:]
	authAt := bodyAt
	if h.Flags&flagNoAuthCred == 0 {
		authAt = -1
		for p := r.off; p+8 <= bodyAt; p++ {
			id := binary.BigEndian.Uint32(r.b[p:])
			n := binary.BigEndian.Uint32(r.b[p+4:])
			if id >= slurmproto.AuthPluginNone && id <= 103 && n > 0 &&
				uint64(p)+8+uint64(n) == uint64(bodyAt) && r.b[bodyAt-1] == 0 {
				authAt = p
				h.AuthPlugin = id
				h.AuthCred = string(r.b[p+8 : bodyAt-1])
				break
			}
		}
		if authAt < 0 {
			return nil, fmt.Errorf("%w: no auth block before the %d-byte body", errNotFrame, h.BodyLength)
		}
	}
	h.RetAndOrig = r.b[r.off:authAt]
	if h.RetCnt == 0 && !validAddr(h.RetAndOrig) {
		return nil, fmt.Errorf("%w: orig_addr %x", errNotFrame, h.RetAndOrig)
	}
	return h, nil
}

// validAddr: a whole slurm_pack_addr (u16 family; AF_INET u32+u16, AF_INET6
// 16 bytes+u16, AF_UNSPEC nothing).
func validAddr(b []byte) bool {
	if len(b) < 2 {
		return false
	}
	switch binary.BigEndian.Uint16(b) {
	case 0:
		return len(b) == 2
	case 2:
		return len(b) == 8
	case 10:
		return len(b) == 20
	}
	return false
}

// ioInit is srun's I/O stream opening (src/common/io_hdr.c io_init_msg):
// u32 length, u16 version, u32 nodeid, u32 stdout_objs, u32 stderr_objs,
// packstr io_key. It is not a Slurm RPC frame.
type ioInit struct {
	Version                       uint16
	NodeID, StdoutObjs, StderrObj uint32
	Key                           string
}

// parseIOInit reads b as one whole io_init_msg (length prefix included).
func parseIOInit(b []byte) (*ioInit, bool) {
	if len(b) < 4+18 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(b)
	r := &reader{b: b[4:]}
	m := &ioInit{Version: r.u16(), NodeID: r.u32(), StdoutObjs: r.u32(), StderrObj: r.u32()}
	keyLen := r.u32()
	if r.err != nil || !plausibleVersion(m.Version) || keyLen == 0 || uint64(n) != 18+uint64(keyLen) ||
		uint64(len(b)) < 4+uint64(n) || b[4+n-1] != 0 {
		return nil, false
	}
	m.Key = string(b[4+18 : 4+n-1])
	return m, true
}

// frames cuts a byte stream into length-prefixed frames, stopping at the
// first length that does not fit or whose header is not a Slurm header.
func frames(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		if n < 16 || int64(n)+4 > int64(len(b)) {
			break
		}
		if _, err := rawParse(b[:4+n]); err != nil {
			break
		}
		out = append(out, b[:4+n])
		b = b[4+n:]
	}
	return out
}

// reader is a bounds-checked big-endian reader; the first short read sets err.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) need(n int) bool {
	if r.err == nil && len(r.b)-r.off < n {
		r.err = errNotFrame
	}
	return r.err == nil
}

func (r *reader) u16() uint16 {
	if !r.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

// str reads a packstr: u32 length including the NUL, the bytes, the NUL
// (length 0 is NULL).
func (r *reader) str() string {
	n := r.u32()
	if n == 0 || !r.need(int(n)) {
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)-1])
	r.off += int(n)
	return s
}
