package slurmproto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Job credential (slurm_cred_t), reference §4 and slurm-24.11-26.05.md §5.2.
// The signed fields, per release (22.05: src/common/slurm_cred.c _pack_cred;
// 24.11 and 26.05: src/plugins/cred/common/cred_common.c cred_create):
//
//	step_id (+ sluid from 24.11); identity: u32 uid, gid; str pw_name,
//	pw_gecos, pw_dir, pw_shell; arr32 gids; strarr gr_names;
//	gres_job_state; gres_step_state (u16 rec_cnt [+records] each; 24.11
//	records carry per-bit arrays and a step type_name);
//	u16 job_core_spec; str job_account;
//	24.11: addr array job_node_addrs;
//	str job_alias_list, job_comment, job_constraints;
//	24.11: time job_end_time; str job_extra; 26.05: u16 job_exclusive;
//	24.11: u16 job_oversubscribe;
//	str job_partition; 26.05: str job_qos; str job_reservation;
//	u16 job_restart_cnt; 24.11: time job_start_time;
//	str job_std_err, job_std_in, job_std_out, step_hostlist; u16 x11;
//	time ctime; u32 tot_core_cnt; bitstr job_core_bitmap, step_core_bitmap;
//	u16 core_array_size [arr16 cores_per_socket, arr16 sockets_per_node,
//	arr32 sock_core_rep_count]; u32 cpu_array_count [arr16 cpu_array,
//	arr32 cpu_array_reps]; u32 job_nhosts, job_ntasks; str job_hostlist;
//	24.11: str job_licenses;
//	u32 job_mem_alloc_size [arr64 job_mem_alloc, arr32 rep_count];
//	u32 step_mem_alloc_size [arr64 step_mem_alloc, arr32 rep_count];
//	str selinux_context; 24.11: switch stepinfo (u32 length + data)
//	                                           <- end of the signed bytes
//	cred/munge: mem/str signature (the munge credential; u32 0 if unsigned)
//
// Under cred/slurm (24.11+) the whole credential is instead one packstr: a
// JWT whose "payload" claim is the base64 of the signed fields above
// (plugins/auth/slurm/cred_slurm.c). DecodeCred tells the two apart by the
// token's shape; Cred.Token holds it.

// Cred is a decoded job credential. See the package doc for the string
// convention (wire NULL = "", wire "" = EmptyString).
type Cred struct {
	// StepID: the step's id in REQUEST_LAUNCH_TASKS creds; step StepIDBatch
	// in batch-launch creds, StepIDExtern in REQUEST_LAUNCH_PROLOG creds
	// and NoVal in kill-job creds (as captured from 22.05.8).
	StepID   StepID
	UID, GID uint32
	PwName   string
	PwGecos  string
	PwDir    string
	PwShell  string
	Gids     []uint32
	GrNames  []string // empty or len(Gids)
	// GresJobState and GresStepState are the raw packed gres job/step
	// state lists (gres_job_state_pack / gres_step_state_pack): u16
	// rec_cnt followed by the records. Without GRES both are {0, 0}; nil
	// packs as {0, 0} too.
	GresJobState  []byte
	GresStepState []byte
	JobCoreSpec   uint16
	JobAccount    string
	// JobNodeAddrs (24.11+): the job's node addresses (cloud nodes), or none.
	JobNodeAddrs     []Addr
	JobAliasList     string
	JobComment       string
	JobConstraints   string
	JobEndTime       time.Time // 24.11+
	JobExtra         string    // 24.11+
	JobExclusive     uint16    // 26.05+
	JobOversubscribe uint16    // 24.11+
	JobPartition     string
	JobQOS           string // 26.05+
	JobReservation   string
	JobRestartCnt    uint16
	JobStartTime     time.Time // 24.11+
	JobStdErr        string
	JobStdIn         string
	JobStdOut        string
	StepHostlist     string
	X11              uint16
	CTime            time.Time // creation time; expiry is CTime + cred_expire
	// TotCoreCnt is what ctld sent: bit_size(job_core_bitmap) or 0.
	TotCoreCnt uint32
	// JobCoreBitmap and StepCoreBitmap are the job's and step's cores on
	// all job nodes, concatenated in job_hostlist order (see CoresForNode).
	JobCoreBitmap  *Bitmap
	StepCoreBitmap *Bitmap
	// CoresPerSocket, SocketsPerNode and SockCoreRepCount have equal
	// length (core_array_size): run-length encoded node layouts.
	CoresPerSocket   []uint16
	SocketsPerNode   []uint16
	SockCoreRepCount []uint32
	// CPUArray and CPUArrayReps have equal length (cpu_array_count).
	CPUArray     []uint16
	CPUArrayReps []uint32
	JobNHosts    uint32
	JobNTasks    uint32
	JobHostlist  string
	JobLicenses  string // 24.11+
	// JobMemAlloc (MiB) and JobMemAllocRepCount have equal length; the
	// same holds for the step arrays. See JobMemLimit and StepMemLimit.
	JobMemAlloc          []uint64
	JobMemAllocRepCount  []uint32
	StepMemAlloc         []uint64
	StepMemAllocRepCount []uint32
	SELinuxContext       string
	// SwitchStepInfo (24.11+) is the switch plugin's step info after its
	// u32 length: empty with switch/none.
	SwitchStepInfo []byte

	// Signed is the exact bytes from step_id through selinux_context as
	// received: what the munge signature covers. DecodeCred sets it and
	// PackCred writes it verbatim when it is non-nil (as slurm_cred_pack
	// re-sends its saved buffer), so a forwarded or re-packed credential
	// keeps its signature valid. Set it to nil after changing fields to
	// pack the fields instead; PackFields returns the bytes to sign.
	Signed []byte
	// Signature is the signature mem: with cred/munge the munge credential
	// string including its trailing NUL ("MUNGE:...:\x00"). Empty for
	// batch, prolog and kill-job credentials, which ctld does not sign.
	// It is also the srun I/O key. Under cred/slurm it is the token
	// followed by a NUL (what srun uses as the I/O key then).
	Signature []byte
	// Token is the cred/slurm JWT ("" for cred/munge). It is what PackCred
	// writes when set; its payload claim is Signed.
	Token string
}

// DecodeCred reads a packed credential (fields and signature, or a
// cred/slurm token) at version. The Cred's byte slices are copies; it does
// not alias the input.
func DecodeCred(u *Unpacker, version uint16) (*Cred, error) {
	if !Speaks(version) {
		return nil, u.Fail(fmt.Errorf("%w: job credential layout 0x%04x", ErrNoLayout, version))
	}
	if tok, ok, err := tokenAt(u, version); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return credFromToken(u, version, tok)
	}
	c := new(Cred)
	var err error
	if c.Signed, c.Signature, err = unpackSigned(u, version, c.unpackFields); err != nil {
		return nil, err
	}
	return c, nil
}

// Job and sbcast credentials share their wire form: signed fields, then the
// munge signature as a mem (22.05) or str (24.11+; the same bytes), or under
// cred/slurm (24.11+) one packstr'd JWT instead of both.

// tokenAt reads a cred/slurm token if one comes next at version.
func tokenAt(u *Unpacker, version uint16) (tok string, ok bool, err error) {
	if version < Version2411 || !peekToken(u) {
		return "", false, nil
	}
	tok, err = u.Str()
	return tok, true, err
}

// unpackSigned reads the fields with unpack, then the signature; signed is
// a copy of the fields' bytes, what the signature covers.
func unpackSigned(u *Unpacker, v uint16, unpack func(*Unpacker, uint16) error) (signed, sig []byte, err error) {
	start := u.Offset()
	if err := unpack(u, v); err != nil {
		return nil, nil, err
	}
	signed = append([]byte(nil), u.b[start:u.Offset()]...)
	sig, err = u.Mem()
	return signed, sig, err
}

// packSigned writes a credential: the token if set, else signed verbatim
// if non-nil (as Slurm re-sends its saved buffer), else the fields, then
// the signature.
func packSigned(p *Packer, v uint16, token string, signed, sig []byte, fields func(*Packer, uint16) error) error {
	if token != "" {
		if v < Version2411 {
			return fmt.Errorf("%w: a cred/slurm token at 0x%04x", ErrNoLayout, v)
		}
		p.Str(token)
		return nil
	}
	if signed != nil {
		p.Raw(signed)
	} else if err := fields(p, v); err != nil {
		return err
	}
	p.Mem(sig)
	return nil
}

// packedFields returns what fields packs at v (the bytes to sign), or
// ErrNoLayout naming what for a release that is not spoken.
func packedFields(what string, v uint16, fields func(*Packer, uint16) error) ([]byte, error) {
	if !Speaks(v) {
		return nil, fmt.Errorf("%w: %s layout 0x%04x", ErrNoLayout, what, v)
	}
	p := NewPacker(256)
	if err := fields(p, v); err != nil {
		return nil, err
	}
	return p.Bytes(), nil
}

// DecodeCredFields decodes signed credential fields alone (a cred/slurm
// token's payload, or munge's signed bytes) at version. Signed is set to a
// copy of b.
func DecodeCredFields(version uint16, b []byte) (*Cred, error) {
	if !Speaks(version) {
		return nil, fmt.Errorf("%w: job credential layout 0x%04x", ErrNoLayout, version)
	}
	u := NewUnpacker(b)
	c := new(Cred)
	if err := c.unpackFields(u, version); err != nil {
		return nil, wrap("credential fields", err)
	}
	if err := u.Done(); err != nil {
		return nil, wrap("credential fields", err)
	}
	c.Signed = append([]byte(nil), b...)
	return c, nil
}

// peekToken reports whether the next value is a packstr holding a JWT
// ("eyJ..." with two dots): the cred/slurm form. A munge-form credential
// starts with a step id whose first bytes cannot be such a string.
func peekToken(u *Unpacker) bool {
	r := u.b[u.off:]
	if len(r) < 8 {
		return false
	}
	n := int(r[0])<<24 | int(r[1])<<16 | int(r[2])<<8 | int(r[3])
	if n < 8 || n > len(r)-4 || !bytes.HasPrefix(r[4:], []byte("eyJ")) || r[4+n-1] != 0 {
		return false
	}
	return bytes.Count(r[4:4+n-1], []byte(".")) == 2
}

// credFromToken decodes the fields out of a cred/slurm token's payload
// claim. Nothing is verified here (internal/credverify checks the token).
func credFromToken(u *Unpacker, version uint16, tok string) (*Cred, error) {
	payload, err := TokenPayload(tok)
	if err != nil {
		return nil, u.Fail(err)
	}
	c, err := DecodeCredFields(version, payload)
	if err != nil {
		return nil, u.Fail(err)
	}
	c.Token = tok
	c.Signature = append([]byte(tok), 0)
	return c, nil
}

// TokenPayload returns the decoded "payload" claim of an auth/slurm JWT
// without verifying it. Slurm encodes the payload with libjwt's base64
// (standard alphabet, padded); the unpadded and URL forms are accepted too.
func TokenPayload(tok string) ([]byte, error) {
	claims, err := tokenClaims(tok)
	if err != nil {
		return nil, err
	}
	var cl struct {
		Payload *string `json:"payload"`
	}
	if err := json.Unmarshal(claims, &cl); err != nil {
		return nil, fmt.Errorf("%w: token claims: %v", ErrMalformed, err)
	}
	if cl.Payload == nil {
		return nil, fmt.Errorf("%w: token has no payload claim", ErrMalformed)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(*cl.Payload); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: token payload is not base64", ErrMalformed)
}

// tokenClaims returns the decoded claims part of a JWT, unverified.
func tokenClaims(tok string) ([]byte, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: token has %d parts", ErrMalformed, len(parts))
	}
	claims, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, fmt.Errorf("%w: token claims: %v", ErrMalformed, err)
	}
	return claims, nil
}

func (c *Cred) unpackFields(u *Unpacker, v uint16) error {
	c.StepID, _ = u.StepID(v)
	id, err := unpackIdentity(u)
	if err != nil {
		return err
	}
	c.UID, c.GID, c.PwName, c.PwGecos, c.PwDir, c.PwShell, c.Gids, c.GrNames =
		id.UID, id.GID, id.PwName, id.PwGecos, id.PwDir, id.PwShell, id.Gids, id.GrNames
	c.GresJobState, _ = rawGres(u, v, skipGresJobStateRec)
	c.GresStepState, _ = rawGres(u, v, skipGresStepStateRec)
	c.JobCoreSpec, _ = u.U16()
	c.JobAccount, _ = u.Str()
	if v >= Version2411 {
		n, err := u.Count("job_node_addrs", 2)
		if err != nil {
			return err
		}
		for i := 0; i < n && u.Err() == nil; i++ {
			a, _ := u.Addr()
			c.JobNodeAddrs = append(c.JobNodeAddrs, a)
		}
	}
	c.JobAliasList, _ = u.Str()
	c.JobComment, _ = u.Str()
	c.JobConstraints, _ = u.Str()
	if v >= Version2411 {
		c.JobEndTime, _ = u.Time()
		c.JobExtra, _ = u.Str()
		if v >= Version2605 {
			c.JobExclusive, _ = u.U16()
		}
		c.JobOversubscribe, _ = u.U16()
	}
	c.JobPartition, _ = u.Str()
	if v >= Version2605 {
		c.JobQOS, _ = u.Str()
	}
	c.JobReservation, _ = u.Str()
	c.JobRestartCnt, _ = u.U16()
	if v >= Version2411 {
		c.JobStartTime, _ = u.Time()
	}
	c.JobStdErr, _ = u.Str()
	c.JobStdIn, _ = u.Str()
	c.JobStdOut, _ = u.Str()
	c.StepHostlist, _ = u.Str()
	c.X11, _ = u.U16()
	c.CTime, _ = u.Time()
	c.TotCoreCnt, _ = u.U32()
	c.JobCoreBitmap, _ = u.Bitmap()
	c.StepCoreBitmap, _ = u.Bitmap()
	coreArraySize, err := u.U16()
	if err != nil {
		return err
	}
	if coreArraySize > 0 {
		c.CoresPerSocket, _ = u.U16Array()
		c.SocketsPerNode, _ = u.U16Array()
		c.SockCoreRepCount, _ = u.U32Array()
		if err := checkLens(u, "core array", int(coreArraySize), len(c.CoresPerSocket), len(c.SocketsPerNode), len(c.SockCoreRepCount)); err != nil {
			return err
		}
	}
	cpuArrayCount, err := u.U32()
	if err != nil {
		return err
	}
	if cpuArrayCount > 0 {
		c.CPUArray, _ = u.U16Array()
		c.CPUArrayReps, _ = u.U32Array()
		if err := checkLens(u, "cpu array", int(cpuArrayCount), len(c.CPUArray), len(c.CPUArrayReps)); err != nil {
			return err
		}
	}
	c.JobNHosts, _ = u.U32()
	c.JobNTasks, _ = u.U32()
	c.JobHostlist, _ = u.Str()
	if v >= Version2411 {
		c.JobLicenses, _ = u.Str()
	}
	c.JobMemAlloc, c.JobMemAllocRepCount, _ = unpackMemAlloc(u, "job mem alloc")
	c.StepMemAlloc, c.StepMemAllocRepCount, _ = unpackMemAlloc(u, "step mem alloc")
	c.SELinuxContext, _ = u.Str()
	if v >= Version2411 {
		c.SwitchStepInfo, _ = u.Mem()
	}
	return u.Err()
}

// PackCred appends c at version: the token if set, else Signed verbatim if
// set, else the packed fields, then the signature. A nil c is an error
// (Slurm always sends a credential where one is expected).
func PackCred(p *Packer, version uint16, c *Cred) error {
	if !Speaks(version) {
		return fmt.Errorf("%w: job credential layout 0x%04x", ErrNoLayout, version)
	}
	if c == nil {
		return fmt.Errorf("%w: nil job credential", ErrMalformed)
	}
	return packSigned(p, version, c.Token, c.Signed, c.Signature, c.packFields)
}

// PackFields returns c's fields packed at version, ignoring Signed,
// Signature and Token: the bytes a credential signer signs (munge), or a
// cred/slurm token's payload.
func (c *Cred) PackFields(version uint16) ([]byte, error) {
	return packedFields("job credential", version, c.packFields)
}

// Identity returns the credential's user identity (its uid..gr_names block).
func (c *Cred) Identity() Identity {
	return Identity{UID: c.UID, GID: c.GID, PwName: c.PwName, PwGecos: c.PwGecos, PwDir: c.PwDir, PwShell: c.PwShell,
		Gids: c.Gids, GrNames: c.GrNames}
}

func (c *Cred) packFields(p *Packer, v uint16) error {
	id := c.Identity()
	if err := id.check(); err != nil {
		return err
	}
	n := len(c.CoresPerSocket)
	if len(c.SocketsPerNode) != n || len(c.SockCoreRepCount) != n || n > 0xffff {
		return fmt.Errorf("%w: cred core arrays of %d, %d, %d", ErrMalformed, n, len(c.SocketsPerNode), len(c.SockCoreRepCount))
	}
	if len(c.CPUArray) != len(c.CPUArrayReps) {
		return fmt.Errorf("%w: cred cpu arrays of %d and %d", ErrMalformed, len(c.CPUArray), len(c.CPUArrayReps))
	}
	if len(c.JobMemAlloc) != len(c.JobMemAllocRepCount) || len(c.StepMemAlloc) != len(c.StepMemAllocRepCount) {
		return fmt.Errorf("%w: cred mem alloc arrays differ in length", ErrMalformed)
	}
	p.StepID(v, c.StepID)
	_ = id.pack(p) // checked above, before anything was packed
	if err := packGres(p, v, "gres job state", c.GresJobState, skipGresJobStateRec); err != nil {
		return err
	}
	if err := packGres(p, v, "gres step state", c.GresStepState, skipGresStepStateRec); err != nil {
		return err
	}
	p.U16(c.JobCoreSpec)
	p.Str(c.JobAccount)
	if v >= Version2411 {
		p.U32(uint32(len(c.JobNodeAddrs)))
		for _, a := range c.JobNodeAddrs {
			p.Addr(a)
		}
	}
	p.Str(c.JobAliasList)
	p.Str(c.JobComment)
	p.Str(c.JobConstraints)
	if v >= Version2411 {
		p.Time(c.JobEndTime)
		p.Str(c.JobExtra)
		if v >= Version2605 {
			p.U16(c.JobExclusive)
		}
		p.U16(c.JobOversubscribe)
	}
	p.Str(c.JobPartition)
	if v >= Version2605 {
		p.Str(c.JobQOS)
	}
	p.Str(c.JobReservation)
	p.U16(c.JobRestartCnt)
	if v >= Version2411 {
		p.Time(c.JobStartTime)
	}
	p.Str(c.JobStdErr)
	p.Str(c.JobStdIn)
	p.Str(c.JobStdOut)
	p.Str(c.StepHostlist)
	p.U16(c.X11)
	p.Time(c.CTime)
	p.U32(c.TotCoreCnt)
	p.Bitmap(c.JobCoreBitmap)
	p.Bitmap(c.StepCoreBitmap)
	p.U16(uint16(n))
	if n > 0 {
		p.U16Array(c.CoresPerSocket)
		p.U16Array(c.SocketsPerNode)
		p.U32Array(c.SockCoreRepCount)
	}
	p.U32(uint32(len(c.CPUArray)))
	if len(c.CPUArray) > 0 {
		p.U16Array(c.CPUArray)
		p.U32Array(c.CPUArrayReps)
	}
	p.U32(c.JobNHosts)
	p.U32(c.JobNTasks)
	p.Str(c.JobHostlist)
	if v >= Version2411 {
		p.Str(c.JobLicenses)
	}
	packMemAlloc(p, c.JobMemAlloc, c.JobMemAllocRepCount)
	packMemAlloc(p, c.StepMemAlloc, c.StepMemAllocRepCount)
	p.Str(c.SELinuxContext)
	if v >= Version2411 {
		p.Mem(c.SwitchStepInfo)
	}
	return nil
}

func packMemAlloc(p *Packer, alloc []uint64, reps []uint32) {
	p.U32(uint32(len(alloc)))
	if len(alloc) > 0 {
		p.U64Array(alloc)
		p.U32Array(reps)
	}
}

func unpackMemAlloc(u *Unpacker, what string) ([]uint64, []uint32, error) {
	n, err := u.U32()
	if err != nil || n == 0 {
		return nil, nil, err
	}
	alloc, _ := u.U64Array()
	reps, _ := u.U32Array()
	if err := checkLens(u, what, int(n), len(alloc), len(reps)); err != nil {
		return nil, nil, err
	}
	return alloc, reps, nil
}

// checkLens fails unless every length equals want (Slurm's "len != size"
// checks after each array).
func checkLens(u *Unpacker, what string, want int, lens ...int) error {
	if u.Err() != nil {
		return u.Err()
	}
	for _, l := range lens {
		if l != want {
			return u.Fail(fmt.Errorf("%w: %s size %d but array of %d", ErrMalformed, what, want, l))
		}
	}
	return nil
}

// repIndex maps a 0-based node index to the index of its entry in a
// run-length rep-count array (slurm_get_rep_count_inx); -1 if out of range.
func repIndex(reps []uint32, nodeIndex int) int {
	if nodeIndex < 0 {
		return -1
	}
	left := uint64(nodeIndex)
	for i, r := range reps {
		if left < uint64(r) {
			return i
		}
		left -= uint64(r)
	}
	return -1
}

// JobMemLimit returns the job's memory limit (MiB) on the node at
// nodeIndex in JobHostlist, as slurm_cred_get_mem does: batch creds
// (step id StepIDBatch) always use entry 0. It returns 0 when the
// credential carries no entry for the node.
func (c *Cred) JobMemLimit(nodeIndex int) uint64 {
	i := repIndex(c.JobMemAllocRepCount, nodeIndex)
	if c.StepID.StepID == StepIDBatch {
		i = 0
	}
	if i < 0 || i >= len(c.JobMemAlloc) {
		return 0
	}
	return c.JobMemAlloc[i]
}

// StepMemLimit returns the step's memory limit (MiB) on the node at
// nodeIndex in StepHostlist (the step's host list, not the job's), or 0
// when the credential has no step entry for it. slurm_cred_get_mem then
// uses the job limit; MemLimits does both.
func (c *Cred) StepMemLimit(nodeIndex int) uint64 {
	if i := repIndex(c.StepMemAllocRepCount, nodeIndex); i >= 0 && i < len(c.StepMemAlloc) {
		return c.StepMemAlloc[i]
	}
	return 0
}

// MemLimits returns the job and step memory limits (MiB) of a node given
// its index in JobHostlist and in StepHostlist, exactly as
// slurm_cred_get_mem: a missing or zero step limit becomes the job limit.
func (c *Cred) MemLimits(jobNodeIndex, stepNodeIndex int) (job, step uint64) {
	job = c.JobMemLimit(jobNodeIndex)
	if step = c.StepMemLimit(stepNodeIndex); step == 0 {
		step = job
	}
	return job, step
}

// NodeCores is one node's slice of the credential's core bitmaps.
type NodeCores struct {
	// Cores is the number of cores of the node in the bitmaps
	// (sockets × cores per socket).
	Cores int
	// Job and Step are the node-local indexes (0..Cores-1) of the cores
	// allocated to the job and to the step.
	Job  []int
	Step []int
}

// CoresForNode returns the job and step cores on the node at nodeIndex in
// JobHostlist, cut out of the concatenated JobCoreBitmap/StepCoreBitmap
// using the sockets/cores rep arrays (format_core_allocs). ok is false if
// the node index is beyond JobNHosts or the rep arrays.
func (c *Cred) CoresForNode(nodeIndex int) (nc NodeCores, ok bool) {
	if nodeIndex < 0 || uint64(nodeIndex) >= uint64(c.JobNHosts) {
		return NodeCores{}, false
	}
	left := uint64(nodeIndex)
	var first uint64
	i := 0
	for ; i < len(c.SockCoreRepCount); i++ {
		per := uint64(c.SocketsPerNode[i]) * uint64(c.CoresPerSocket[i])
		r := uint64(c.SockCoreRepCount[i])
		if left < r {
			first += per * left
			nc.Cores = int(per)
			break
		}
		first += per * r
		left -= r
	}
	if i == len(c.SockCoreRepCount) {
		return NodeCores{}, false
	}
	for j := 0; j < nc.Cores; j++ {
		bit := int(first) + j
		if c.JobCoreBitmap != nil && c.JobCoreBitmap.Test(bit) {
			nc.Job = append(nc.Job, j)
		}
		if c.StepCoreBitmap != nil && c.StepCoreBitmap.Test(bit) {
			nc.Step = append(nc.Step, j)
		}
	}
	return nc, true
}

// Raw GRES state lists. Records are skipped structurally so that the raw
// bytes can be kept (they are part of the signed credential) and
// re-encoded unchanged.

// gresMagic is GRES_MAGIC, the first u32 of every gres state record.
const gresMagic uint32 = 0x438a34d4

// noGres is a gres state list with no records (u16 rec_cnt 0).
var noGres = []byte{0, 0}

// rawGres reads a u16 rec_cnt and rec_cnt records (skipped with skip) and
// returns a copy of the bytes read.
func rawGres(u *Unpacker, v uint16, skip func(*Unpacker, uint16) error) ([]byte, error) {
	start := u.Offset()
	n, err := u.U16()
	if err != nil {
		return nil, err
	}
	if err := skipGresRecs(u, v, uint32(n), skip); err != nil {
		return nil, err
	}
	return append([]byte(nil), u.b[start:u.Offset()]...), nil
}

// rawGresList reads a slurm_pack_list of gres records (u32 count, NoVal
// for a NULL list: 26.05's gres_prep lists) and returns a copy of it.
func rawGresList(u *Unpacker, v uint16, skip func(*Unpacker, uint16) error) ([]byte, error) {
	start := u.Offset()
	n, err := u.U32()
	if err != nil {
		return nil, err
	}
	if n != NoVal {
		if err := skipGresRecs(u, v, n, skip); err != nil {
			return nil, err
		}
	}
	return append([]byte(nil), u.b[start:u.Offset()]...), nil
}

func skipGresRecs(u *Unpacker, v uint16, n uint32, skip func(*Unpacker, uint16) error) error {
	if _, err := u.CheckCount("gres records", n, 4); err != nil {
		return err
	}
	for i := uint32(0); i < n; i++ {
		magic, err := u.U32()
		if err != nil {
			return err
		}
		if magic != gresMagic {
			return u.Fail(fmt.Errorf("%w: gres record magic 0x%08x", ErrMalformed, magic))
		}
		if err := skip(u, v); err != nil {
			return err
		}
	}
	return nil
}

// packGres writes raw (nil: no records) after checking it is exactly one
// well-formed gres list of version v.
func packGres(p *Packer, v uint16, what string, raw []byte, skip func(*Unpacker, uint16) error) error {
	return packRawGres(p, v, what, raw, skip, rawGres, noGres)
}

// packGresList is packGres for the slurm_pack_list form (nil: a NULL list).
func packGresList(p *Packer, v uint16, what string, raw []byte, skip func(*Unpacker, uint16) error) error {
	return packRawGres(p, v, what, raw, skip, rawGresList, noGresList)
}

// noGresList is a NULL slurm_pack_list (count NO_VAL), what ctld sends
// for a job without GRES.
var noGresList = []byte{0xff, 0xff, 0xff, 0xfe}

func packRawGres(p *Packer, v uint16, what string, raw []byte, skip func(*Unpacker, uint16) error,
	read func(*Unpacker, uint16, func(*Unpacker, uint16) error) ([]byte, error), none []byte) error {
	if raw == nil {
		p.Raw(none)
		return nil
	}
	u := NewUnpacker(raw)
	if _, err := read(u, v, skip); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := u.Done(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	p.Raw(raw)
	return nil
}

// skipBitmap skips a pack_bit_str_hex value without interpreting it.
func skipBitmap(u *Unpacker) {
	if n, err := u.U32(); err == nil && n != NoVal {
		_, _ = u.Str()
	}
}

// skipBitmaps skips node_cnt bitmaps.
func skipBitmaps(u *Unpacker, nodeCnt uint32) error {
	n, err := u.CheckCount("gres bitmaps", nodeCnt, 4)
	if err != nil {
		return err
	}
	for i := 0; i < n && u.Err() == nil; i++ {
		skipBitmap(u)
	}
	return u.Err()
}

// skipOptional skips a u8 flag and, when it is set, what skip reads.
func skipOptional(u *Unpacker, skip func() error) error {
	has, err := u.U8()
	if err != nil || has == 0 {
		return err
	}
	return skip()
}

// skipPerNodeArrays skips node_cnt × (u8 flag [+ arr64]): 24.11's
// gres_per_bit_alloc and gres_per_bit_step_alloc.
func skipPerNodeArrays(u *Unpacker, nodeCnt uint32) error {
	n, err := u.CheckCount("gres per-bit arrays", nodeCnt, 1)
	if err != nil {
		return err
	}
	for i := 0; i < n && u.Err() == nil; i++ {
		_ = skipOptional(u, func() error { _, err := u.U64Array(); return err })
	}
	return u.Err()
}

func gresNodeCnt(u *Unpacker) (uint32, error) {
	nodeCnt, err := u.U32()
	if err != nil {
		return 0, err
	}
	if nodeCnt > NoVal {
		return 0, u.Fail(fmt.Errorf("%w: gres node_cnt 0x%x", ErrMalformed, nodeCnt))
	}
	return nodeCnt, nil
}

// skipGresJobStateRec skips one gres_job_state_pack record after its magic.
func skipGresJobStateRec(u *Unpacker, v uint16) error {
	// plugin_id u32, cpus_per_gres u16, flags u16, 5×u64 gres_per_*,
	// mem_per_gres; u16 ntasks_per_gres; u64 total_gres.
	_, _ = u.Raw(4 + 2 + 2 + 5*8 + 2 + 8)
	_, _ = u.Str() // type_name
	nodeCnt, err := gresNodeCnt(u)
	if err != nil {
		return err
	}
	arr := func() error { _, err := u.U64Array(); return err }
	bits := func() error { return skipBitmaps(u, nodeCnt) }
	if err := skipOptional(u, arr); err != nil { // gres_cnt_node_alloc
		return err
	}
	if err := skipOptional(u, bits); err != nil { // gres_bit_alloc
		return err
	}
	if v >= Version2411 {
		if err := skipPerNodeArrays(u, nodeCnt); err != nil { // gres_per_bit_alloc
			return err
		}
	}
	if err := skipOptional(u, bits); err != nil { // gres_bit_step_alloc
		return err
	}
	err = skipOptional(u, func() error { // gres_cnt_step_alloc
		n, err := u.CheckCount("gres_cnt_step_alloc", nodeCnt, 8)
		if err != nil {
			return err
		}
		_, err = u.Raw(8 * n)
		return err
	})
	if err != nil {
		return err
	}
	if v >= Version2411 {
		return skipPerNodeArrays(u, nodeCnt) // gres_per_bit_step_alloc
	}
	return u.Err()
}

// skipGresStepStateRec skips one gres_step_state_pack record after its magic.
func skipGresStepStateRec(u *Unpacker, v uint16) error {
	// plugin_id u32, cpus_per_gres u16, flags u16, 6×u64 gres_per_step,
	// gres_per_node, gres_per_socket, gres_per_task, mem_per_gres, total_gres.
	_, _ = u.Raw(4 + 2 + 2 + 6*8)
	if v >= Version2411 {
		_, _ = u.Str() // type_name
	}
	nodeCnt, err := gresNodeCnt(u)
	if err != nil {
		return err
	}
	skipBitmap(u) // node_in_use
	if err := skipOptional(u, func() error { _, err := u.U64Array(); return err }); err != nil {
		return err
	}
	if err := skipOptional(u, func() error { return skipBitmaps(u, nodeCnt) }); err != nil {
		return err
	}
	if v >= Version2411 {
		return skipPerNodeArrays(u, nodeCnt) // gres_per_bit_alloc
	}
	return u.Err()
}

// skipGresJobAllocRec skips one gres_job_alloc_pack / gres_prep_pack
// record (the prolog / epilog GRES info of kill_job_msg and
// prolog_launch_msg) after its magic; one layout in every spoken release.
func skipGresJobAllocRec(u *Unpacker, _ uint16) error {
	_, _ = u.U32() // plugin_id
	nodeCnt, err := gresNodeCnt(u)
	if err != nil {
		return err
	}
	if err := skipOptional(u, func() error { _, err := u.U64Array(); return err }); err != nil {
		return err
	}
	return skipOptional(u, func() error { return skipBitmaps(u, nodeCnt) })
}
