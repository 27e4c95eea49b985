package slurmproto

import (
	"fmt"
	"time"
)

// Job credential (slurm_cred_t), reference §4. Layout from _pack_cred and
// slurm_cred_unpack in src/common/slurm_cred.c of Slurm 22.05.8:
//
//	step_id; u32 uid, gid; str pw_name, pw_gecos, pw_dir, pw_shell;
//	arr32 gids; strarr gr_names (count 0 or ngids);
//	gres_job_state; gres_step_state (u16 rec_cnt [+records] each);
//	u16 job_core_spec; str job_account, job_alias_list, job_comment,
//	job_constraints, job_partition, job_reservation; u16 job_restart_cnt;
//	str job_std_err, job_std_in, job_std_out, step_hostlist; u16 x11;
//	time ctime; u32 tot_core_cnt; bitstr job_core_bitmap, step_core_bitmap;
//	u16 core_array_size [arr16 cores_per_socket, arr16 sockets_per_node,
//	arr32 sock_core_rep_count]; u32 cpu_array_count [arr16 cpu_array,
//	arr32 cpu_array_reps]; u32 job_nhosts, job_ntasks; str job_hostlist;
//	u32 job_mem_alloc_size [arr64 job_mem_alloc, arr32 rep_count];
//	u32 step_mem_alloc_size [arr64 step_mem_alloc, arr32 rep_count];
//	str selinux_context                      <- end of the signed bytes
//	mem signature
//
// Only the 22.05 layout (0x2600..) is implemented; DecodeCred and PackCred
// fail with ErrUnsupportedVersion for older versions. A 23.02 layout goes
// into a new branch keyed on version >= 0x2700.

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
	GresJobState   []byte
	GresStepState  []byte
	JobCoreSpec    uint16
	JobAccount     string
	JobAliasList   string
	JobComment     string
	JobConstraints string
	JobPartition   string
	JobReservation string
	JobRestartCnt  uint16
	JobStdErr      string
	JobStdIn       string
	JobStdOut      string
	StepHostlist   string
	X11            uint16
	CTime          time.Time // creation time; expiry is CTime + cred_expire
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
	// JobMemAlloc (MiB) and JobMemAllocRepCount have equal length; the
	// same holds for the step arrays. See JobMemLimit and StepMemLimit.
	JobMemAlloc          []uint64
	JobMemAllocRepCount  []uint32
	StepMemAlloc         []uint64
	StepMemAllocRepCount []uint32
	SELinuxContext       string

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
	// It is also the srun I/O key.
	Signature []byte
}

// DecodeCred reads a packed credential (fields and signature) at version.
// The Cred's byte slices are copies; it does not alias the input.
func DecodeCred(u *Unpacker, version uint16) (*Cred, error) {
	if version < Version2205 {
		return nil, u.Fail(fmt.Errorf("%w: job credential layout 0x%04x", ErrUnsupportedVersion, version))
	}
	start := u.Offset()
	c := new(Cred)
	c.StepID, _ = u.StepID()
	c.UID, _ = u.U32()
	c.GID, _ = u.U32()
	c.PwName, _ = u.Str()
	c.PwGecos, _ = u.Str()
	c.PwDir, _ = u.Str()
	c.PwShell, _ = u.Str()
	c.Gids, _ = u.U32Array()
	c.GrNames, _ = u.StrArray()
	if u.Err() != nil {
		return nil, u.Err()
	}
	if len(c.GrNames) != 0 && len(c.GrNames) != len(c.Gids) {
		return nil, u.Fail(fmt.Errorf("%w: cred has %d gr_names for %d gids", ErrMalformed, len(c.GrNames), len(c.Gids)))
	}
	c.GresJobState, _ = rawGres(u, skipGresJobStateRec)
	c.GresStepState, _ = rawGres(u, skipGresStepStateRec)
	c.JobCoreSpec, _ = u.U16()
	c.JobAccount, _ = u.Str()
	c.JobAliasList, _ = u.Str()
	c.JobComment, _ = u.Str()
	c.JobConstraints, _ = u.Str()
	c.JobPartition, _ = u.Str()
	c.JobReservation, _ = u.Str()
	c.JobRestartCnt, _ = u.U16()
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
		return nil, err
	}
	if coreArraySize > 0 {
		c.CoresPerSocket, _ = u.U16Array()
		c.SocketsPerNode, _ = u.U16Array()
		c.SockCoreRepCount, _ = u.U32Array()
		if err := checkLens(u, "core array", int(coreArraySize), len(c.CoresPerSocket), len(c.SocketsPerNode), len(c.SockCoreRepCount)); err != nil {
			return nil, err
		}
	}
	cpuArrayCount, err := u.U32()
	if err != nil {
		return nil, err
	}
	if cpuArrayCount > 0 {
		c.CPUArray, _ = u.U16Array()
		c.CPUArrayReps, _ = u.U32Array()
		if err := checkLens(u, "cpu array", int(cpuArrayCount), len(c.CPUArray), len(c.CPUArrayReps)); err != nil {
			return nil, err
		}
	}
	c.JobNHosts, _ = u.U32()
	c.JobNTasks, _ = u.U32()
	c.JobHostlist, _ = u.Str()
	c.JobMemAlloc, c.JobMemAllocRepCount, _ = unpackMemAlloc(u, "job mem alloc")
	c.StepMemAlloc, c.StepMemAllocRepCount, _ = unpackMemAlloc(u, "step mem alloc")
	c.SELinuxContext, _ = u.Str()
	if u.Err() != nil {
		return nil, u.Err()
	}
	c.Signed = append([]byte(nil), u.b[start:u.Offset()]...)
	c.Signature, _ = u.Mem()
	return c, u.Err()
}

// PackCred appends c at version: Signed verbatim if set, else the packed
// fields, then the signature mem. A nil c is an error (Slurm always sends a
// credential where one is expected).
func PackCred(p *Packer, version uint16, c *Cred) error {
	if version < Version2205 {
		return fmt.Errorf("%w: job credential layout 0x%04x", ErrUnsupportedVersion, version)
	}
	if c == nil {
		return fmt.Errorf("%w: nil job credential", ErrMalformed)
	}
	if c.Signed != nil {
		p.Raw(c.Signed)
	} else if err := c.packFields(p); err != nil {
		return err
	}
	p.Mem(c.Signature)
	return nil
}

// PackFields returns c's fields packed at version, ignoring Signed and
// Signature: the bytes a credential signer (munge) signs.
func (c *Cred) PackFields(version uint16) ([]byte, error) {
	if version < Version2205 {
		return nil, fmt.Errorf("%w: job credential layout 0x%04x", ErrUnsupportedVersion, version)
	}
	p := NewPacker(512)
	if err := c.packFields(p); err != nil {
		return nil, err
	}
	return p.Bytes(), nil
}

func (c *Cred) packFields(p *Packer) error {
	if len(c.GrNames) != 0 && len(c.GrNames) != len(c.Gids) {
		return fmt.Errorf("%w: cred has %d gr_names for %d gids", ErrMalformed, len(c.GrNames), len(c.Gids))
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
	p.StepID(c.StepID)
	p.U32(c.UID)
	p.U32(c.GID)
	p.Str(c.PwName)
	p.Str(c.PwGecos)
	p.Str(c.PwDir)
	p.Str(c.PwShell)
	p.U32Array(c.Gids)
	p.StrArray(c.GrNames)
	if err := packGres(p, "gres job state", c.GresJobState, skipGresJobStateRec); err != nil {
		return err
	}
	if err := packGres(p, "gres step state", c.GresStepState, skipGresStepStateRec); err != nil {
		return err
	}
	p.U16(c.JobCoreSpec)
	p.Str(c.JobAccount)
	p.Str(c.JobAliasList)
	p.Str(c.JobComment)
	p.Str(c.JobConstraints)
	p.Str(c.JobPartition)
	p.Str(c.JobReservation)
	p.U16(c.JobRestartCnt)
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
	packMemAlloc(p, c.JobMemAlloc, c.JobMemAllocRepCount)
	packMemAlloc(p, c.StepMemAlloc, c.StepMemAllocRepCount)
	p.Str(c.SELinuxContext)
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
func rawGres(u *Unpacker, skip func(*Unpacker) error) ([]byte, error) {
	start := u.Offset()
	n, err := u.U16()
	if err != nil {
		return nil, err
	}
	if _, err := u.CheckCount("gres records", uint32(n), 4); err != nil {
		return nil, err
	}
	for i := 0; i < int(n); i++ {
		magic, err := u.U32()
		if err != nil {
			return nil, err
		}
		if magic != gresMagic {
			return nil, u.Fail(fmt.Errorf("%w: gres record magic 0x%08x", ErrMalformed, magic))
		}
		if err := skip(u); err != nil {
			return nil, err
		}
	}
	return append([]byte(nil), u.b[start:u.Offset()]...), nil
}

// packGres writes raw (nil: no records) after checking it is exactly one
// well-formed gres list.
func packGres(p *Packer, what string, raw []byte, skip func(*Unpacker) error) error {
	if raw == nil {
		p.Raw(noGres)
		return nil
	}
	u := NewUnpacker(raw)
	if _, err := rawGres(u, skip); err != nil {
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

// skipGresJobStateRec skips one gres_job_state_pack record after its magic.
func skipGresJobStateRec(u *Unpacker) error {
	// plugin_id u32, cpus_per_gres u16, flags u16, 5×u64 gres_per_*,
	// mem_per_gres; u16 ntasks_per_gres; u64 total_gres.
	_, _ = u.Raw(4 + 2 + 2 + 5*8 + 2 + 8)
	_, _ = u.Str() // type_name
	nodeCnt, err := u.U32()
	if err != nil {
		return err
	}
	if nodeCnt > NoVal {
		return u.Fail(fmt.Errorf("%w: gres node_cnt 0x%x", ErrMalformed, nodeCnt))
	}
	if has, _ := u.U8(); has != 0 {
		_, _ = u.U64Array() // gres_cnt_node_alloc
	}
	if has, _ := u.U8(); has != 0 {
		if err := skipBitmaps(u, nodeCnt); err != nil { // gres_bit_alloc
			return err
		}
	}
	if has, _ := u.U8(); has != 0 {
		if err := skipBitmaps(u, nodeCnt); err != nil { // gres_bit_step_alloc
			return err
		}
	}
	if has, _ := u.U8(); has != 0 {
		n, err := u.CheckCount("gres_cnt_step_alloc", nodeCnt, 8)
		if err != nil {
			return err
		}
		_, _ = u.Raw(8 * n)
	}
	return u.Err()
}

// skipGresStepStateRec skips one gres_step_state_pack record after its magic.
func skipGresStepStateRec(u *Unpacker) error {
	// plugin_id u32, cpus_per_gres u16, flags u16, 6×u64 gres_per_step,
	// gres_per_node, gres_per_socket, gres_per_task, mem_per_gres, total_gres.
	_, _ = u.Raw(4 + 2 + 2 + 6*8)
	nodeCnt, err := u.U32()
	if err != nil {
		return err
	}
	if nodeCnt > NoVal {
		return u.Fail(fmt.Errorf("%w: gres node_cnt 0x%x", ErrMalformed, nodeCnt))
	}
	skipBitmap(u) // node_in_use
	if has, _ := u.U8(); has != 0 {
		_, _ = u.U64Array()
	}
	if has, _ := u.U8(); has != 0 {
		if err := skipBitmaps(u, nodeCnt); err != nil {
			return err
		}
	}
	return u.Err()
}

// skipGresJobAllocRec skips one gres_job_alloc_pack record (the prolog /
// epilog GRES info of kill_job_msg and prolog_launch_msg) after its magic.
func skipGresJobAllocRec(u *Unpacker) error {
	_, _ = u.U32() // plugin_id
	nodeCnt, err := u.U32()
	if err != nil {
		return err
	}
	if nodeCnt > NoVal {
		return u.Fail(fmt.Errorf("%w: gres node_cnt 0x%x", ErrMalformed, nodeCnt))
	}
	if has, _ := u.U8(); has != 0 {
		_, _ = u.U64Array()
	}
	if has, _ := u.U8(); has != 0 {
		if err := skipBitmaps(u, nodeCnt); err != nil {
			return err
		}
	}
	return u.Err()
}
