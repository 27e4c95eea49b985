// Package slurmproto is a pure-Go codec for the Slurm RPC wire format as
// spoken by Slurm 22.05 daemons (protocol 0x2600), including the 20.11 and
// 21.08 header layouts (0x2400, 0x2500) that slurmctld still uses towards
// nodes it has not heard from. It does no I/O except ReadFrame/WriteFrame
// and imports only the standard library.
//
// # Frame layout
//
//	u32 length | header | auth block | body
//
//	header (22.05):  u16 version, u16 flags, u16 msg_type, u32 body_length,
//	                 u16 forward_cnt [str nodes, u32 timeout_ms, u16 tree_width],
//	                 u16 ret_cnt [ret_cnt × {u32 err, u16 type, str node, body}],
//	                 slurm_addr_t orig_addr
//	header (<22.05): the same with an extra u16 msg_index after flags
//	auth (munge):    u32 101, str "MUNGE:...:"
//	body:            body_length bytes, layout per msg_type and version
//
// DecodeMessage splits a frame; DecodeBody decodes the body through a
// registry of codecs; EncodeMessage and EncodeBody go the other way.
// EncodeForward re-frames the untouched auth+body bytes behind a new header,
// which is how Slurm forwards (the originator's credential is reused).
//
// # Strings: NULL versus ""
//
// Slurm distinguishes a NULL string (packed as u32 0) from an empty one
// (u32 1 followed by a NUL). Both happen on the wire, and golden frames
// must re-encode byte-identically, so this package uses plain Go strings
// with one reserved value:
//
//	wire NULL  (00000000)     <-> Go ""
//	wire ""    (00000001 00)  <-> Go EmptyString ("\x00")
//	wire "abc" (00000004 61626300) <-> Go "abc"
//
// Code that builds messages writes "" for "unset" and gets what C code
// sends for an unset char*. Code that reads messages and wants C semantics
// (NULL and "" both empty) uses CString(s). A wire string whose last byte is
// not NUL is rejected with ErrMalformed (C would read past it).
//
// Other nil-versus-empty choices follow the same idea: a nil slice packed
// with slurm_pack_list semantics (TRES lists) is a NULL list (count NoVal),
// a non-nil empty slice is count 0; a nil *Bitmap is NO_VAL; a nil *JobAcct
// is "no accounting data" (u8 0); the zero time.Time packs as 0 and 0
// decodes as the zero time.Time.
//
// # Concurrency
//
// Package-level functions (DecodeMessage, EncodeMessage, DecodeBody, ...)
// are safe for concurrent use from any goroutine: the body registry is
// filled by init functions and read-only afterwards. A Packer or Unpacker
// value belongs to one goroutine. Decoded messages alias the frame they
// came from; do not modify the frame while they are in use.
//
// # Safety
//
// Every Unpacker read is bounds-checked and fails with an error wrapping
// ErrShortBuffer, ErrTooLarge or ErrMalformed; no input makes the decoders
// panic (fuzzed) or allocate more than the remaining input can justify:
// counts are checked against (remaining bytes / minimum element size)
// before any slice is made, and ReadFrame checks the length prefix against
// its limit before allocating.
//
// # Versions and adding a 23.02 layout
//
// DecodeHeader accepts versions 0x2400..0x26ff (ValidVersion) and picks the
// header layout by version; anything else fails with ErrUnsupportedVersion
// while still returning the Version so a caller can answer
// SLURM_PROTOCOL_VERSION_ERROR. (Real 22.05 daemons accept exactly 0x2400,
// 0x2500 and 0x2600.)
//
// Body codecs are registered per message type and per inclusive version
// range with RegisterBody. To add Slurm 23.02 (0x2700):
//
//  1. raise MaxHeaderVersion to 0x27ff and, if the header changed, add a
//     branch in PackHeader/DecodeHeader keyed on Version >= 0x2700;
//  2. for each message whose layout changed, narrow the existing codec to
//     MaxVersion 0x26ff and RegisterBody a new one for 0x2700..0x27ff
//     (see MESSAGE_NODE_REGISTRATION_STATUS, which already has a 20.11/21.08
//     and a 22.05 layout);
//  3. unchanged messages registered with allVersions keep working once
//     their range is widened;
//  4. capture golden frames from the new daemons into testdata/ (see
//     testdata/README.md) and add them to the golden and fuzz tests.
//
// Codec bodies get the header's version, so reply encoders must be given the
// request's version (Slurm answers in the version it was asked in).
//
// # Generated tables
//
// msgtype_table.go (MsgType constants, names) and rc_table.go (error codes)
// are generated from the Slurm 22.05.8 headers by internal/genenums; only
// names and numbers are taken.
package slurmproto
