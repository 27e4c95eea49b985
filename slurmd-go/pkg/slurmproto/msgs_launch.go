package slurmproto

import "fmt"

// srun step bodies (reference §2C): REQUEST_LAUNCH_TASKS,
// RESPONSE_LAUNCH_TASKS, MESSAGE_TASK_EXIT and REQUEST_REATTACH_TASKS.
// Layouts checked field by field against src/common/slurm_protocol_pack.c
// of Slurm 22.05.8 (_pack/_unpack_launch_tasks_request_msg,
// _pack_launch_tasks_response_msg, _pack_task_exit_msg,
// _pack_reattach_tasks_request_msg), job_options.c (job_options_pack) and
// the switch/select plugin packers.
//
// REQUEST_TERMINATE_TASKS has the signal_tasks_msg body in 22.05 (the same
// _pack_cancel_tasks_msg as REQUEST_SIGNAL_TASKS) and is registered with
// SignalTasks in msgs_job.go; RESPONSE_REATTACH_TASKS is registered in
// msgs_step.go.
//
// The requests are registered for the spoken releases only (22.05, 24.11,
// 26.05; C's 21.08/20.11 branches also differ in the request itself: a
// partition string and, for 20.11, no container and two NULL checkpoint
// strings). 24.11 moved the launch's identity into the credential, dropped
// the switch and select job info, and since 23.11 REQUEST_REATTACH_TASKS
// carries the I/O key instead of a credential. The response and task-exit
// bodies have had one layout since 20.11 apart from the step id's SLUID.

// LaunchTasks.Flags bits (slurm_protocol_defs.h LAUNCH_*). 22.05 defines
// exactly these; bit 5 (0x20) is unused ("free for reuse two versions
// after 22.05"), and LAUNCH_USER_MANAGED_GPUS etc. came after 22.05.
const (
	LaunchParallelDebug uint32 = 0x01 // LAUNCH_PARALLEL_DEBUG
	LaunchMultiProg     uint32 = 0x02 // LAUNCH_MULTI_PROG (--multi-prog)
	LaunchPTY           uint32 = 0x04 // LAUNCH_PTY (--pty)
	LaunchBufferedIO    uint32 = 0x08 // LAUNCH_BUFFERED_IO (not --unbuffered)
	LaunchLabelIO       uint32 = 0x10 // LAUNCH_LABEL_IO (--label)
	LaunchNoAlloc       uint32 = 0x40 // LAUNCH_NO_ALLOC (--no-allocate)
	LaunchOvercommit    uint32 = 0x80 // LAUNCH_OVERCOMMIT (--overcommit)
)

// SwitchPluginNone is the switch_jobinfo plugin id of switch/none
// (SWITCH_PLUGIN_NONE), which packs no payload after the id. It is the only
// switch plugin this codec supports: the others (cray_aries, hpe_slingshot)
// pack plugin-specific data, and a slurmd configured with switch/none
// rejects their ids too.
const SwitchPluginNone uint32 = 100

// jobOptionsTag is JOB_OPTIONS_PACK_TAG, the string job_options_pack
// writes before the option count.
const jobOptionsTag = "job_options"

// JobOption is one entry of the job_options list (job_option_info: SPANK
// plugin options forwarded by srun). Type is the C int, packed as u32.
type JobOption struct {
	Type uint32
	Opt  string
	Arg  string
}

// MPI plugin ids of launch_tasks_request_msg_t.mpi_plugin_id (slurm_mpi.h).
const (
	MPIPluginNone       uint32 = 101
	MPIPluginPMI2       uint32 = 102
	MPIPluginCrayShasta uint32 = 103
	MPIPluginPMIx2      uint32 = 104
	MPIPluginPMIx3      uint32 = 105
	MPIPluginPMIx4      uint32 = 106
	MPIPluginPMIx5      uint32 = 107
)

// MPIPluginName is the plugin's name as srun --mpi spells it ("" if unknown).
func MPIPluginName(id uint32) string {
	switch id {
	case MPIPluginNone:
		return "none"
	case MPIPluginPMI2:
		return "pmi2"
	case MPIPluginCrayShasta:
		return "cray_shasta"
	case MPIPluginPMIx2, MPIPluginPMIx3, MPIPluginPMIx4, MPIPluginPMIx5:
		return "pmix"
	}
	return ""
}

// LaunchTasks is launch_tasks_request_msg_t, REQUEST_LAUNCH_TASKS (srun →
// every node of the step, tree-forwarded), 22.05 layout. Fields are in wire
// order. See the package doc for the string convention.
//
// Release differences (fields marked with the release they exist from or
// in): 24.11 dropped uid, gid and user_name (the credential's identity has
// them; decoding fills UID and GID from it), the switch and select job
// info and the alias list (a NULL placeholder), and added the cpus-per-task
// compact arrays, stepmgr and oom_kill_step; 26.05 (25.05) added the het
// step task counts and alloc_tls_cert, and dropped the placeholder.
type LaunchTasks struct {
	StepID           StepID
	UID              uint32 // 22.05 on the wire
	GID              uint32 // 22.05 on the wire
	UserName         string // 22.05
	Gids             []uint32
	HetJobNodeOffset uint32 // NoVal unless a het job
	HetJobID         uint32 // NoVal unless a het job
	// HetJobNNodes is NoVal unless a het job; otherwise HetJobTIDs has
	// HetJobNNodes entries (the task ids on each node of the het job).
	HetJobNNodes uint32
	HetJobTIDs   [][]uint32
	// HetJobNTasks is NoVal unless a het job; otherwise HetJobTIDOffsets
	// (C het_job_tid_offsets: task id -> het component) has HetJobNTasks
	// entries.
	HetJobNTasks     uint32
	HetJobTIDOffsets []uint32
	HetJobOffset     uint32 // NoVal unless a het job
	HetJobStepCnt    uint32
	// HetJobStepTaskCnts (26.05) has HetJobStepCnt entries when
	// HetJobOffset < NoVal and HetJobStepCnt > 0, else none.
	HetJobStepTaskCnts []uint32
	HetJobTaskOffset   uint32 // NoVal unless a het job
	HetJobNodeList     string
	MPIPluginID        uint32
	NTasks             uint32
	NTasksPerBoard     uint16
	NTasksPerCore      uint16
	NTasksPerTRES      uint16
	NTasksPerSocket    uint16
	JobMemLim          uint64 // MiB per node, or per CPU with MemPerCPU
	StepMemLim         uint64 // MiB
	// NNodes is the number of nodes of the step; TasksToLaunch and
	// GlobalTaskIDs have NNodes entries, and len(GlobalTaskIDs[i]) ==
	// TasksToLaunch[i] (on the wire each node is u16 count + arr32).
	NNodes      uint32
	CPUsPerTask uint16
	// CptCompactArray and CptCompactReps (24.11) have equal length: the
	// run-length encoded cpus per task of a heterogeneous step.
	CptCompactArray []uint16
	CptCompactReps  []uint32
	TresPerTask     string
	ThreadsPerCore  uint16
	TaskDist        uint32
	NodeCPUs        uint16
	JobCoreSpec     uint16
	AccelBindType   uint16
	// CredVersion is the layout of Cred; 0 encodes as the message version.
	CredVersion uint16
	// Cred is the step credential, signed by slurmctld (Signature is the
	// munge credential and the srun I/O key). Decoding keeps its signed
	// bytes in Cred.Signed, and encoding writes them verbatim.
	Cred          *Cred
	TasksToLaunch []uint16
	GlobalTaskIDs [][]uint32
	// RespPorts are srun's ports for RESPONSE_LAUNCH_TASKS / MESSAGE_TASK_EXIT
	// (node i uses RespPorts[i % len]) at OrigAddr's IP (or the peer's).
	RespPorts []uint16
	// OrigAddr is what srun packs (AF_UNSPEC as captured); slurmd
	// overwrites it with the message header's orig_addr, i.e. srun's
	// address (req.c _rpc_launch_tasks), before handing it to the stepd.
	OrigAddr    Addr
	Env         []string
	SpankJobEnv []string
	Container   string
	Cwd         string
	CPUBindType uint16
	CPUBind     string
	MemBindType uint16
	MemBind     string
	Argv        []string
	Flags       uint32 // Launch* bits
	OFName      string
	EFName      string
	IFName      string
	// IOPorts are srun's I/O listen ports (node i connects to
	// IOPorts[i % len]).
	IOPorts      []uint16
	AllocTLSCert string // 26.05
	Profile      uint32
	TaskProlog   string
	TaskEpilog   string
	SlurmdDebug  uint16
	// SwitchPluginID (22.05) is the switch_jobinfo plugin id; only
	// SwitchPluginNone (no payload) is supported, and 0 encodes as
	// SwitchPluginNone.
	SwitchPluginID uint32
	// JobOptions is packed as str "job_options", u32 count, count ×
	// {u32 type, str opt, str arg}; nil and empty both pack count 0.
	JobOptions       []JobOption
	AliasList        string // 22.05
	CompleteNodelist string
	OpenMode         uint8 // 0, OpenModeAppend or OpenModeTruncate
	AcctgFreq        string
	CPUFreqMin       uint32
	CPUFreqMax       uint32
	CPUFreqGov       uint32
	SelectPluginID   uint32 // 22.05: select_jobinfo, plugin id, no payload (SelectPluginConsTres, ...)
	TresBind         string
	TresFreq         string
	X11Forwarding
	Stepmgr     string // 24.11: the stepmgr host with enable_stepmgr
	OOMKillStep bool   // 24.11
	// HasJobPtr (24.11) is set only with enable_stepmgr, whose job, node
	// and partition records follow; those launches are refused.
	HasJobPtr bool
}

// MsgType implements Body.
func (LaunchTasks) MsgType() MsgType { return RequestLaunchTasks }

func (m *LaunchTasks) check(v uint16) error {
	if m.HetJobNNodes == NoVal {
		if len(m.HetJobTIDs) != 0 {
			return fmt.Errorf("%w: het_job_nnodes NO_VAL with %d het_job_tids", ErrMalformed, len(m.HetJobTIDs))
		}
	} else if uint64(len(m.HetJobTIDs)) != uint64(m.HetJobNNodes) {
		return fmt.Errorf("%w: het_job_nnodes %d but %d het_job_tids", ErrMalformed, m.HetJobNNodes, len(m.HetJobTIDs))
	}
	if m.HetJobNTasks == NoVal {
		if len(m.HetJobTIDOffsets) != 0 {
			return fmt.Errorf("%w: het_job_ntasks NO_VAL with %d het_job_tid_offsets", ErrMalformed, len(m.HetJobTIDOffsets))
		}
	} else if uint64(len(m.HetJobTIDOffsets)) != uint64(m.HetJobNTasks) {
		return fmt.Errorf("%w: het_job_ntasks %d but %d het_job_tid_offsets", ErrMalformed, m.HetJobNTasks, len(m.HetJobTIDOffsets))
	}
	if v >= Version2605 && m.hasHetStepTaskCnts() && uint64(len(m.HetJobStepTaskCnts)) != uint64(m.HetJobStepCnt) {
		return fmt.Errorf("%w: het_job_step_cnt %d but %d het_job_step_task_cnts", ErrMalformed, m.HetJobStepCnt, len(m.HetJobStepTaskCnts))
	}
	if m.NNodes >= NoVal || uint64(len(m.TasksToLaunch)) != uint64(m.NNodes) || len(m.GlobalTaskIDs) != len(m.TasksToLaunch) {
		return fmt.Errorf("%w: nnodes %d but %d tasks_to_launch and %d global_task_ids",
			ErrMalformed, m.NNodes, len(m.TasksToLaunch), len(m.GlobalTaskIDs))
	}
	for i, n := range m.TasksToLaunch {
		if len(m.GlobalTaskIDs[i]) != int(n) {
			return fmt.Errorf("%w: node %d: tasks_to_launch %d but %d global task ids", ErrMalformed, i, n, len(m.GlobalTaskIDs[i]))
		}
	}
	if len(m.CptCompactArray) != len(m.CptCompactReps) {
		return fmt.Errorf("%w: %d cpt_compact_array but %d cpt_compact_reps", ErrMalformed, len(m.CptCompactArray), len(m.CptCompactReps))
	}
	if m.HasJobPtr {
		return fmt.Errorf("%w: launch with stepmgr job records", ErrMalformed)
	}
	if err := checkPorts("resp ports", m.RespPorts); err != nil {
		return err
	}
	return checkPorts("io ports", m.IOPorts)
}

func (m *LaunchTasks) hasHetStepTaskCnts() bool { return m.HetJobOffset < NoVal && m.HetJobStepCnt > 0 }

func encLaunchTasks(p *Packer, v uint16, m *LaunchTasks) error {
	if err := m.check(v); err != nil {
		return err
	}
	sw := m.SwitchPluginID
	if sw == 0 {
		sw = SwitchPluginNone
	}
	if v == Version2205 && sw != SwitchPluginNone {
		return fmt.Errorf("%w: switch plugin %d (only switch/none is supported)", ErrMalformed, sw)
	}

	p.StepID(v, m.StepID)
	if v == Version2205 {
		p.U32(m.UID)
		p.U32(m.GID)
		p.Str(m.UserName)
	}
	p.U32Array(m.Gids)
	p.U32(m.HetJobNodeOffset)
	p.U32(m.HetJobID)
	p.U32(m.HetJobNNodes)
	for _, tids := range m.HetJobTIDs {
		p.U32Array(tids)
	}
	p.U32(m.HetJobNTasks)
	for _, o := range m.HetJobTIDOffsets {
		p.U32(o)
	}
	p.U32(m.HetJobOffset)
	p.U32(m.HetJobStepCnt)
	if v >= Version2605 && m.hasHetStepTaskCnts() {
		p.U32Array(m.HetJobStepTaskCnts)
	}
	p.U32(m.HetJobTaskOffset)
	p.Str(m.HetJobNodeList)
	p.U32(m.MPIPluginID)
	p.U32(m.NTasks)
	p.U16(m.NTasksPerBoard)
	p.U16(m.NTasksPerCore)
	p.U16(m.NTasksPerTRES)
	p.U16(m.NTasksPerSocket)
	p.U64(m.JobMemLim)
	p.U64(m.StepMemLim)
	p.U32(m.NNodes)
	p.U16(m.CPUsPerTask)
	if v >= Version2411 {
		p.U16Array(m.CptCompactArray)
		p.U32Array(m.CptCompactReps)
	}
	p.Str(m.TresPerTask)
	p.U16(m.ThreadsPerCore)
	p.U32(m.TaskDist)
	p.U16(m.NodeCPUs)
	p.U16(m.JobCoreSpec)
	p.U16(m.AccelBindType)
	cv := m.CredVersion
	if cv == 0 {
		cv = v
	}
	p.U16(cv)
	if err := PackCred(p, cv, m.Cred); err != nil {
		return err
	}
	for i, n := range m.TasksToLaunch {
		p.U16(n)
		p.U32Array(m.GlobalTaskIDs[i])
	}
	packPorts(p, m.RespPorts)
	p.Addr(m.OrigAddr)
	p.StrArray(m.Env)
	p.StrArray(m.SpankJobEnv)
	p.Str(m.Container)
	p.Str(m.Cwd)
	p.U16(m.CPUBindType)
	p.Str(m.CPUBind)
	p.U16(m.MemBindType)
	p.Str(m.MemBind)
	p.StrArray(m.Argv)
	p.U32(m.Flags)
	p.Str(m.OFName)
	p.Str(m.EFName)
	p.Str(m.IFName)
	packPorts(p, m.IOPorts)
	if v >= Version2605 {
		p.Str(m.AllocTLSCert)
	}
	p.U32(m.Profile)
	p.Str(m.TaskProlog)
	p.Str(m.TaskEpilog)
	p.U16(m.SlurmdDebug)
	if v == Version2205 {
		p.U32(sw) // switch_jobinfo: switch/none packs only its id
	}
	p.Str(jobOptionsTag)
	p.U32(uint32(len(m.JobOptions)))
	for _, o := range m.JobOptions {
		p.U32(o.Type)
		p.Str(o.Opt)
		p.Str(o.Arg)
	}
	switch v {
	case Version2205:
		p.Str(m.AliasList)
	case Version2411:
		p.Str("") // the alias_list placeholder
	}
	p.Str(m.CompleteNodelist)
	p.U8(m.OpenMode)
	p.Str(m.AcctgFreq)
	p.U32(m.CPUFreqMin)
	p.U32(m.CPUFreqMax)
	p.U32(m.CPUFreqGov)
	if v == Version2205 {
		p.U32(m.SelectPluginID)
	}
	p.Str(m.TresBind)
	p.Str(m.TresFreq)
	m.X11Forwarding.pack(p)
	if v >= Version2411 {
		p.Str(m.Stepmgr)
		p.Bool(m.OOMKillStep)
		p.Bool(false) // has_job_ptr (check refused true)
	}
	return nil
}

func decLaunchTasks(u *Unpacker, v uint16, _ MsgType, m *LaunchTasks) error {
	m.StepID, _ = u.StepID(v)
	if v == Version2205 {
		m.UID, _ = u.U32()
		m.GID, _ = u.U32()
		m.UserName, _ = u.Str()
	}
	m.Gids, _ = u.U32Array()
	m.HetJobNodeOffset, _ = u.U32()
	m.HetJobID, _ = u.U32()
	var err error
	if m.HetJobNNodes, err = u.U32(); err != nil {
		return err
	}
	if m.HetJobNNodes != NoVal {
		n, err := u.CheckCount("het_job_nnodes", m.HetJobNNodes, 4)
		if err != nil {
			return err
		}
		if n > 0 {
			m.HetJobTIDs = make([][]uint32, n)
			for i := range m.HetJobTIDs {
				if m.HetJobTIDs[i], err = u.U32Array(); err != nil {
					return err
				}
			}
		}
	}
	if m.HetJobNTasks, err = u.U32(); err != nil {
		return err
	}
	if m.HetJobNTasks != NoVal {
		n, err := u.CheckCount("het_job_ntasks", m.HetJobNTasks, 4)
		if err != nil {
			return err
		}
		if n > 0 {
			m.HetJobTIDOffsets = make([]uint32, n)
			for i := range m.HetJobTIDOffsets {
				m.HetJobTIDOffsets[i], _ = u.U32()
			}
		}
	}
	m.HetJobOffset, _ = u.U32()
	m.HetJobStepCnt, _ = u.U32()
	if v >= Version2605 && m.hasHetStepTaskCnts() {
		m.HetJobStepTaskCnts, _ = u.U32Array()
		if err := checkLens(u, "het_job_step_cnt", int(m.HetJobStepCnt), len(m.HetJobStepTaskCnts)); err != nil {
			return err
		}
	}
	m.HetJobTaskOffset, _ = u.U32()
	m.HetJobNodeList, _ = u.Str()
	m.MPIPluginID, _ = u.U32()
	m.NTasks, _ = u.U32()
	m.NTasksPerBoard, _ = u.U16()
	m.NTasksPerCore, _ = u.U16()
	m.NTasksPerTRES, _ = u.U16()
	m.NTasksPerSocket, _ = u.U16()
	m.JobMemLim, _ = u.U64()
	m.StepMemLim, _ = u.U64()
	if m.NNodes, err = u.U32(); err != nil {
		return err
	}
	if m.NNodes >= NoVal {
		return u.Fail(fmt.Errorf("%w: nnodes 0x%x", ErrMalformed, m.NNodes))
	}
	m.CPUsPerTask, _ = u.U16()
	if v >= Version2411 {
		m.CptCompactArray, _ = u.U16Array()
		m.CptCompactReps, _ = u.U32Array()
		if err := checkLens(u, "cpt_compact_cnt", len(m.CptCompactArray), len(m.CptCompactReps)); err != nil {
			return err
		}
	}
	m.TresPerTask, _ = u.Str()
	m.ThreadsPerCore, _ = u.U16()
	m.TaskDist, _ = u.U32()
	m.NodeCPUs, _ = u.U16()
	m.JobCoreSpec, _ = u.U16()
	m.AccelBindType, _ = u.U16()
	if m.CredVersion, err = u.U16(); err != nil {
		return err
	}
	if m.Cred, err = DecodeCred(u, m.CredVersion); err != nil {
		return err
	}
	if v >= Version2411 {
		m.UID, m.GID = m.Cred.UID, m.Cred.GID
	}
	// Each node is at least u16 tasks + u32 array count.
	nn, err := u.CheckCount("nnodes", m.NNodes, 6)
	if err != nil {
		return err
	}
	if nn > 0 {
		m.TasksToLaunch = make([]uint16, nn)
		m.GlobalTaskIDs = make([][]uint32, nn)
		for i := 0; i < nn; i++ {
			m.TasksToLaunch[i], _ = u.U16()
			if m.GlobalTaskIDs[i], err = u.U32Array(); err != nil {
				return err
			}
			// C compares tasks_to_launch with the array count cast to
			// u16; an exact match is required here so that the body
			// re-encodes identically (only forged input differs).
			if len(m.GlobalTaskIDs[i]) != int(m.TasksToLaunch[i]) {
				return u.Fail(fmt.Errorf("%w: node %d: tasks_to_launch %d but %d global task ids",
					ErrMalformed, i, m.TasksToLaunch[i], len(m.GlobalTaskIDs[i])))
			}
		}
	}
	if m.RespPorts, err = unpackPorts(u, "resp ports"); err != nil {
		return err
	}
	if m.OrigAddr, err = u.Addr(); err != nil {
		return err
	}
	m.Env, _ = u.StrArray()
	m.SpankJobEnv, _ = u.StrArray()
	m.Container, _ = u.Str()
	m.Cwd, _ = u.Str()
	m.CPUBindType, _ = u.U16()
	m.CPUBind, _ = u.Str()
	m.MemBindType, _ = u.U16()
	m.MemBind, _ = u.Str()
	m.Argv, _ = u.StrArray()
	m.Flags, _ = u.U32()
	m.OFName, _ = u.Str()
	m.EFName, _ = u.Str()
	m.IFName, _ = u.Str()
	if u.Err() != nil {
		return u.Err()
	}
	if m.IOPorts, err = unpackPorts(u, "io ports"); err != nil {
		return err
	}
	if v >= Version2605 {
		m.AllocTLSCert, _ = u.Str()
	}
	m.Profile, _ = u.U32()
	m.TaskProlog, _ = u.Str()
	m.TaskEpilog, _ = u.Str()
	m.SlurmdDebug, _ = u.U16()
	if v == Version2205 {
		if m.SwitchPluginID, err = u.U32(); err != nil {
			return err
		}
		if m.SwitchPluginID != SwitchPluginNone {
			return u.Fail(fmt.Errorf("%w: switch plugin %d (only switch/none is supported)", ErrMalformed, m.SwitchPluginID))
		}
	}
	if m.JobOptions, err = unpackJobOptions(u); err != nil {
		return err
	}
	switch v {
	case Version2205:
		m.AliasList, _ = u.Str()
	case Version2411:
		if alias, _ := u.Str(); alias != "" && u.Err() == nil {
			return u.Fail(fmt.Errorf("%w: launch alias_list placeholder %q", ErrMalformed, alias))
		}
	}
	m.CompleteNodelist, _ = u.Str()
	m.OpenMode, _ = u.U8()
	m.AcctgFreq, _ = u.Str()
	m.CPUFreqMin, _ = u.U32()
	m.CPUFreqMax, _ = u.U32()
	m.CPUFreqGov, _ = u.U32()
	if v == Version2205 {
		m.SelectPluginID, _ = u.U32()
	}
	m.TresBind, _ = u.Str()
	m.TresFreq, _ = u.Str()
	m.X11Forwarding.unpack(u)
	if v >= Version2411 {
		m.Stepmgr, _ = u.Str()
		m.OOMKillStep, _ = u.Bool()
		if m.HasJobPtr, err = u.Bool(); err == nil && m.HasJobPtr {
			return u.Fail(fmt.Errorf("%w: launch with stepmgr job records (enable_stepmgr is not supported)", ErrMalformed))
		}
	}
	return nil
}

func unpackJobOptions(u *Unpacker) ([]JobOption, error) {
	tag, err := u.Str()
	if err != nil {
		return nil, err
	}
	if tag != jobOptionsTag {
		return nil, u.Fail(fmt.Errorf("%w: job options tag %q", ErrMalformed, tag))
	}
	// Each option is at least u32 type + two string lengths.
	n, err := u.Count("job options", 12)
	if err != nil || n == 0 {
		return nil, err
	}
	opts := make([]JobOption, n)
	for i := range opts {
		opts[i].Type, _ = u.U32()
		opts[i].Opt, _ = u.Str()
		if opts[i].Arg, err = u.Str(); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// checkPorts rejects port lists C cannot unpack (count >= NO_VAL16).
func checkPorts(what string, ports []uint16) error {
	if len(ports) >= int(NoVal16) {
		return fmt.Errorf("%w: %d %s", ErrMalformed, len(ports), what)
	}
	return nil
}

// packPorts packs a u16 count and count × u16 (resp_port, io_port).
func packPorts(p *Packer, ports []uint16) {
	p.U16(uint16(len(ports)))
	for _, v := range ports {
		p.U16(v)
	}
}

// unpackPorts reads a u16 count (NO_VAL16 and above are rejected, as in C)
// and count × u16. Count 0 yields nil.
func unpackPorts(u *Unpacker, what string) ([]uint16, error) {
	n16, err := u.U16()
	if err != nil {
		return nil, err
	}
	if n16 >= NoVal16 {
		return nil, u.Fail(fmt.Errorf("%w: %s count 0x%x", ErrMalformed, what, n16))
	}
	n, err := u.CheckCount(what, uint32(n16), 2)
	if err != nil || n == 0 {
		return nil, err
	}
	ports := make([]uint16, n)
	for i := range ports {
		ports[i], _ = u.U16()
	}
	return ports, u.Err()
}

// LaunchTasksResponse is launch_tasks_response_msg_t, RESPONSE_LAUNCH_TASKS
// (stepd → srun's RespPorts once the tasks are started). On the wire:
// step_id; u32 return_code; str node_name; u32 count_of_pids;
// arr32 local_pids; arr32 task_ids; count_of_pids is len(LocalPIDs), and
// LocalPIDs and TaskIDs (global task ids) have the same length.
type LaunchTasksResponse struct {
	StepID     StepID
	ReturnCode uint32
	NodeName   string
	LocalPIDs  []uint32
	TaskIDs    []uint32
}

// MsgType implements Body.
func (LaunchTasksResponse) MsgType() MsgType { return ResponseLaunchTasks }

// TaskExit is task_exit_msg_t, MESSAGE_TASK_EXIT (stepd → srun, one per
// group of tasks with the same exit status). On the wire: u32 return_code;
// u32 num_tasks; arr32 task_id_list; step_id, with num_tasks =
// len(TaskIDs).
type TaskExit struct {
	ReturnCode uint32   // raw wait status (exit 3 -> 0x300)
	TaskIDs    []uint32 // global task ids
	StepID     StepID
}

// MsgType implements Body.
func (TaskExit) MsgType() MsgType { return MessageTaskExit }

// X11Forwarding is the x11 block of a batch or task launch (x11 flags, the
// allocating host and port, the magic cookie, the target and its port),
// packed alike in both.
type X11Forwarding struct {
	X11            uint16
	X11AllocHost   string
	X11AllocPort   uint16
	X11MagicCookie string
	X11Target      string
	X11TargetPort  uint16
}

func (x *X11Forwarding) pack(p *Packer) {
	p.U16(x.X11)
	p.Str(x.X11AllocHost)
	p.U16(x.X11AllocPort)
	p.Str(x.X11MagicCookie)
	p.Str(x.X11Target)
	p.U16(x.X11TargetPort)
}

func (x *X11Forwarding) unpack(u *Unpacker) {
	x.X11, _ = u.U16()
	x.X11AllocHost, _ = u.Str()
	x.X11AllocPort, _ = u.U16()
	x.X11MagicCookie, _ = u.Str()
	x.X11Target, _ = u.Str()
	x.X11TargetPort, _ = u.U16()
}

// ReattachTasks is reattach_tasks_request_msg_t, REQUEST_REATTACH_TASKS
// (sattach → the step's nodes, forwarded). On the wire:
//
//	22.05: step_id; u16 n, n × u16 resp ports; u16 n, n × u16 io ports;
//	       cred (at the message version, no cred_version): a fake one
//	       signed by munge as the user (sattach _generate_fake_cred);
//	       slurmd does not verify it and uses its signature as the I/O key;
//	24.11: step_id; str io_key; the two port lists (23.11 sends the key
//	       itself instead of a credential);
//	26.05: str tls_cert in front of the 24.11 layout (25.05).
type ReattachTasks struct {
	TLSCert   string // 26.05
	StepID    StepID
	IOKey     string // 24.11+
	RespPorts []uint16
	IOPorts   []uint16
	Cred      *Cred // 22.05
}

// MsgType implements Body.
func (ReattachTasks) MsgType() MsgType { return RequestReattachTasks }

// Key returns the I/O key the step manager's io_init_msg must carry back to
// sattach: the fake credential's signature (22.05) or, from 23.11, the key
// itself with its NUL, as packstr sends it. Stock 24.11 and 26.05 sattach
// send an empty key (they take the leading bytes of auth_g_create's
// credential object as a string), which stock echoes unchecked.
func (m *ReattachTasks) Key() []byte {
	if m.Cred != nil {
		return m.Cred.Signature
	}
	return append([]byte(CString(m.IOKey)), 0)
}

func init() {
	RegisterBody(RequestLaunchTasks, typedCodec(spoken, encLaunchTasks, decLaunchTasks))

	RegisterBody(ResponseLaunchTasks, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *LaunchTasksResponse) error {
			if len(m.LocalPIDs) != len(m.TaskIDs) {
				return fmt.Errorf("%w: %d local pids but %d task ids", ErrMalformed, len(m.LocalPIDs), len(m.TaskIDs))
			}
			p.StepID(v, m.StepID)
			p.U32(m.ReturnCode)
			p.Str(m.NodeName)
			p.U32(uint32(len(m.LocalPIDs)))
			p.U32Array(m.LocalPIDs)
			p.U32Array(m.TaskIDs)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *LaunchTasksResponse) error {
			m.StepID, _ = u.StepID(v)
			m.ReturnCode, _ = u.U32()
			m.NodeName, _ = u.Str()
			count, _ := u.U32()
			m.LocalPIDs, _ = u.U32Array()
			m.TaskIDs, _ = u.U32Array()
			return checkLens(u, "count_of_pids", int(count), len(m.LocalPIDs), len(m.TaskIDs))
		}))

	RegisterBody(MessageTaskExit, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *TaskExit) error {
			p.U32(m.ReturnCode)
			p.U32(uint32(len(m.TaskIDs)))
			p.U32Array(m.TaskIDs)
			p.StepID(v, m.StepID)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *TaskExit) error {
			m.ReturnCode, _ = u.U32()
			n, _ := u.U32()
			m.TaskIDs, _ = u.U32Array()
			if err := checkLens(u, "num_tasks", int(n), len(m.TaskIDs)); err != nil {
				return err
			}
			m.StepID, _ = u.StepID(v)
			return nil
		}))

	RegisterBody(RequestReattachTasks, typedCodec(spoken,
		func(p *Packer, v uint16, m *ReattachTasks) error {
			if err := checkPorts("resp ports", m.RespPorts); err != nil {
				return err
			}
			if err := checkPorts("io ports", m.IOPorts); err != nil {
				return err
			}
			if v >= Version2605 {
				p.Str(m.TLSCert)
			}
			p.StepID(v, m.StepID)
			if v >= Version2411 {
				p.Str(m.IOKey)
			}
			packPorts(p, m.RespPorts)
			packPorts(p, m.IOPorts)
			if v == Version2205 {
				return PackCred(p, v, m.Cred)
			}
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *ReattachTasks) error {
			var err error
			if v >= Version2605 {
				m.TLSCert, _ = u.Str()
			}
			if m.StepID, err = u.StepID(v); err != nil {
				return err
			}
			if v >= Version2411 {
				if m.IOKey, err = u.Str(); err != nil {
					return err
				}
			}
			if m.RespPorts, err = unpackPorts(u, "resp ports"); err != nil {
				return err
			}
			if m.IOPorts, err = unpackPorts(u, "io ports"); err != nil {
				return err
			}
			if v == Version2205 {
				m.Cred, err = DecodeCred(u, v)
			}
			return err
		}))
}
