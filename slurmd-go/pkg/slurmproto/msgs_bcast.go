package slurmproto

import (
	"fmt"
	"time"
)

// REQUEST_FILE_BCAST (sbcast → each node of the job; answered with
// RESPONSE_SLURM_RC): one block of a file and the job's sbcast credential
// (cred_sbcast.go). Layouts from src/common/slurm_protocol_pack.c
// _pack_file_bcast/_unpack_file_bcast of 22.05.8, 24.11.5 and 26.05:
//
//	u32 block_no; u16 compress, flags, modes; u32 uid; str user_name;
//	u32 gid; time atime, mtime; str fname; 24.11 (24.05): str exe_fname;
//	u32 block_len, uncomp_len; u64 block_offset, file_size;
//	mem block (block_len bytes); sbcast credential
//
// Registered for the spoken releases only: 20.11's layout differs (u16
// last_block and force instead of flags).

// FileBcast.Flags bits (file_bcast_flags_t; the same in 22.05, 24.11 and
// 26.05).
const (
	FileBcastForce     uint16 = 1 << 0 // FILE_BCAST_FORCE: replace an existing file (sbcast -f)
	FileBcastLastBlock uint16 = 1 << 1 // FILE_BCAST_LAST_BLOCK
	FileBcastSO        uint16 = 1 << 2 // FILE_BCAST_SO: a shared library of --send-libs
	FileBcastExe       uint16 = 1 << 3 // FILE_BCAST_EXE: the executable whose libraries follow
)

// FileBcast.Compress values (compress_type; 1 was zlib, gone by 22.05).
const (
	CompressOff uint16 = 0 // COMPRESS_OFF
	CompressLZ4 uint16 = 2 // COMPRESS_LZ4
)

// FileBcast is file_bcast_msg_t, REQUEST_FILE_BCAST. Fields are in wire
// order; see the package doc for the string convention.
type FileBcast struct {
	BlockNo  uint32 // 1 for the file's first block
	Compress uint16 // CompressOff or CompressLZ4: how Block is compressed
	Flags    uint16 // FileBcast* bits
	Modes    uint16 // st_mode of the source file (type and permission bits)
	UID      uint32 // the destination file's owner
	UserName string
	GID      uint32 // the destination file's group
	ATime    time.Time
	MTime    time.Time
	FName    string // the destination path
	ExeFName string // 24.11+: the executable of --send-libs
	// UncompLen is the block's length before compression.
	UncompLen   uint32
	BlockOffset uint64
	FileSize    uint64
	// Block is the block's data as sent; its length is block_len.
	Block []byte
	// Cred is the job's sbcast credential, at the message version.
	Cred *SbcastCred
}

// MsgType implements Body.
func (FileBcast) MsgType() MsgType { return RequestFileBcast }

func encFileBcast(p *Packer, v uint16, m *FileBcast) error {
	if m.Cred == nil {
		return fmt.Errorf("%w: file bcast without an sbcast credential", ErrMalformed)
	}
	if len(m.Block) > MaxPackMemLen {
		return fmt.Errorf("%w: file bcast block of %d bytes", ErrTooLarge, len(m.Block))
	}
	p.U32(m.BlockNo)
	p.U16(m.Compress)
	p.U16(m.Flags)
	p.U16(m.Modes)
	p.U32(m.UID)
	p.Str(m.UserName)
	p.U32(m.GID)
	p.Time(m.ATime)
	p.Time(m.MTime)
	p.Str(m.FName)
	if v >= Version2411 {
		p.Str(m.ExeFName)
	}
	p.U32(uint32(len(m.Block)))
	p.U32(m.UncompLen)
	p.U64(m.BlockOffset)
	p.U64(m.FileSize)
	p.Mem(m.Block)
	return PackSbcastCred(p, v, m.Cred)
}

func decFileBcast(u *Unpacker, v uint16, _ MsgType, m *FileBcast) error {
	m.BlockNo, _ = u.U32()
	m.Compress, _ = u.U16()
	m.Flags, _ = u.U16()
	m.Modes, _ = u.U16()
	m.UID, _ = u.U32()
	m.UserName, _ = u.Str()
	m.GID, _ = u.U32()
	m.ATime, _ = u.Time()
	m.MTime, _ = u.Time()
	m.FName, _ = u.Str()
	if v >= Version2411 {
		m.ExeFName, _ = u.Str()
	}
	blockLen, _ := u.U32()
	m.UncompLen, _ = u.U32()
	m.BlockOffset, _ = u.U64()
	m.FileSize, _ = u.U64()
	m.Block, _ = u.Mem()
	if err := checkLens(u, "file bcast block_len", int(blockLen), len(m.Block)); err != nil {
		return err
	}
	var err error
	m.Cred, err = DecodeSbcastCred(u, v)
	return err
}

func init() {
	RegisterBody(RequestFileBcast, typedCodec(spoken, encFileBcast, decFileBcast))
}
