// Package slurmproto is a pure-Go codec for the Slurm RPC wire format of
// the node daemon of Slurm 22.05 (protocol 0x2600), 24.11 (0x2A00) and
// 26.05 (0x2D00), including the older header versions controllers use
// towards nodes they have not heard from (20.11 and 21.08 from 22.05,
// 23.02 from 24.11, 23.11 and 24.05 from 25.x). The release is threaded
// through every call, never assumed; release.go says which releases are
// spoken in full. It does no I/O except ReadFrame/WriteFrame and imports
// only the standard library and pkg/jwtclaim (token claims, itself standard
// library only).
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
//	header (23.11+): forward block + [str net_cred if flags&0x80]
//	header (24.11+): forward block + u16 tree_depth
//	auth (munge):    u32 101, str "MUNGE:...:"
//	auth (slurm):    u32 103, str JWT          (24.11+)
//	                 no auth block at all when flags&0x40 (24.11+ replies)
//	body:            body_length bytes, layout per msg_type and release
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
// # Releases and adding one
//
// DecodeHeader accepts the exact protocol versions of the releases from
// 20.11 to 26.05 (ValidVersion); anything else fails with
// ErrUnsupportedVersion while still returning the Version so a caller can
// answer SLURM_PROTOCOL_VERSION_ERROR.
//
// Body codecs are registered per message type for an explicit list of
// versions (RegisterBody, Codec.Versions). A codec may serve several
// releases and branch on the version inside, as Slurm's own packers do,
// but a (type, version) pair nobody registered has no layout: DecodeBody
// and EncodeBody fail with ErrNoLayout (which wraps ErrUnsupportedVersion),
// and nothing is decoded with another release's layout. Layouts() lists
// the registry. To add a release:
//
//  1. add its version constant and put it in headerVersions (and in
//     spokenVersions if nodes register with it) in release.go; branch
//     PackHeader/DecodeHeader if its header changed;
//  2. add it to the version list of every codec whose layout it shares,
//     and a version branch in those whose layout changed (see
//     MESSAGE_NODE_REGISTRATION_STATUS for five layouts in one codec);
//  3. capture golden frames from the new daemons into testdata/ (see
//     testdata/README.md) and add them to the golden and fuzz tests.
//
// Codec bodies get the header's version, so reply encoders must be given the
// request's version (Slurm answers in the version it was asked in).
//
// # Generated tables
//
// msgtype_table.go (MsgType constants, names) and rc_table.go (error codes)
// are generated from the Slurm headers by internal/genenums; only names and
// numbers are taken.
package slurmproto
