package slurmproto

import (
	"fmt"
	"time"
)

// Batch-job and job-control bodies (reference §2B, §2C, §2D). Layouts from
// src/common/slurm_protocol_pack.c of Slurm 22.05.8. Bodies that carry a
// job credential (BatchJobLaunch, LaunchProlog, KillJob at 22.05) are
// registered for 0x2600..0x26ff only; to add 23.02, narrow them and
// register the new layout (see doc.go).

// Flags of REQUEST_SIGNAL_TASKS (slurm.h KILL_*).
const (
	KillJobBatch   uint16 = 0x0001 // signal the batch shell only
	KillJobArray   uint16 = 0x0002
	KillStepsOnly  uint16 = 0x0004 // all steps but not the batch script
	KillFullJob    uint16 = 0x0008 // all steps including the batch script
	KillFedRequeue uint16 = 0x0010
	KillHurry      uint16 = 0x0020
	KillOOM        uint16 = 0x0040
	KillNoSibs     uint16 = 0x0080
	KillJobResv    uint16 = 0x0100
)

// Dummy signal numbers (slurm_protocol_defs.h SIG_*), used in signal
// requests and as job_rc.
const (
	SigOOM       uint16 = 253
	SigTermKill  uint16 = 991
	SigUME       uint16 = 992
	SigRequeued  uint16 = 993
	SigPreempted uint16 = 994
	SigDebugWake uint16 = 995
	SigTimeLimit uint16 = 996
	SigAbort     uint16 = 997
	SigNodeFail  uint16 = 998
	SigFailure   uint16 = 999
)

// SuspendInt.Op values (slurm.h enum suspend_opts).
const (
	SuspendJob uint16 = 0 // SUSPEND_JOB
	ResumeJob  uint16 = 1 // RESUME_JOB
)

// BatchJobLaunch.OpenMode values (slurm.h OPEN_MODE_*); 0 means the
// JobFileAppend default.
const (
	OpenModeAppend   uint8 = 1
	OpenModeTruncate uint8 = 2
)

// MemPerCPU is the bit of BatchJobLaunch.PnMinMemory that marks a per-CPU
// (not per-node) memory request (MEM_PER_CPU).
const MemPerCPU uint64 = 0x8000000000000000

// BatchJobLaunch is REQUEST_BATCH_JOB_LAUNCH (ctld → batch host). Fields in
// wire order. Argv and Environment are each preceded on the wire by a
// separate u32 count (argc, envc) that must equal the array's own count.
//
// 24.11 dropped uid, gid, user_name, alias_list and select_jobinfo (the
// identity is the credential's) and appended the cpu frequencies and
// oom_kill_step; 26.05 (25.11) dropped job_id (the credential's step id has
// it) and added tres_per_task. Decoding fills UID, GID and, for 26.05,
// JobID from the credential so that readers need not care.
type BatchJobLaunch struct {
	JobID       uint32
	HetJobID    uint32   // 0 unless a het job
	UID         uint32   // 22.05 on the wire
	GID         uint32   // 22.05 on the wire
	UserName    string   // 22.05 on the wire: NULL from ctld; slurmd takes it from the cred
	Gids        []uint32 // empty from ctld; slurmd takes them from the cred
	Partition   string
	NTasks      uint32
	PnMinMemory uint64 // MiB; MemPerCPU bit set for --mem-per-cpu
	OpenMode    uint8  // 0, OpenModeAppend or OpenModeTruncate
	Overcommit  uint8
	ArrayJobID  uint32 // 0 unless an array job
	ArrayTaskID uint32 // NoVal unless an array job
	AcctgFreq   string
	Container   string
	CPUBindType uint16
	CPUsPerTask uint16
	RestartCnt  uint16
	JobCoreSpec uint16
	// CPUsPerNode and CPUCountReps have equal length (num_cpu_groups).
	CPUsPerNode  []uint16
	CPUCountReps []uint32
	AliasList    string // 22.05
	CPUBind      string
	Nodes        string
	Script       string
	WorkDir      string
	StdErr       string
	StdIn        string
	StdOut       string
	Argv         []string
	SpankJobEnv  []string
	Environment  []string
	JobMem       uint64
	// CredVersion is the layout of Cred; 0 encodes as the message version.
	CredVersion    uint16
	Cred           *Cred
	SelectPluginID uint32 // 22.05: select_jobinfo, plugin id, no payload (SelectPluginConsTres, ...)
	Account        string
	QOS            string
	ResvName       string
	Profile        uint32
	TresBind       string
	TresFreq       string
	TresPerTask    string // 26.05
	CPUFreqMin     uint32 // 24.11
	CPUFreqMax     uint32 // 24.11
	CPUFreqGov     uint32 // 24.11
	OOMKillStep    bool   // 24.11
}

// MsgType implements Body.
func (BatchJobLaunch) MsgType() MsgType { return RequestBatchJobLaunch }

func encBatchLaunch(p *Packer, v uint16, m *BatchJobLaunch) error {
	if len(m.CPUsPerNode) != len(m.CPUCountReps) {
		return fmt.Errorf("%w: %d cpus_per_node but %d cpu_count_reps", ErrMalformed, len(m.CPUsPerNode), len(m.CPUCountReps))
	}
	if v < Version2605 {
		p.U32(m.JobID)
	}
	p.U32(m.HetJobID)
	if v == Version2205 {
		p.U32(m.UID)
		p.U32(m.GID)
		p.Str(m.UserName)
	}
	p.U32Array(m.Gids)
	p.Str(m.Partition)
	p.U32(m.NTasks)
	p.U64(m.PnMinMemory)
	p.U8(m.OpenMode)
	p.U8(m.Overcommit)
	p.U32(m.ArrayJobID)
	p.U32(m.ArrayTaskID)
	p.Str(m.AcctgFreq)
	p.Str(m.Container)
	p.U16(m.CPUBindType)
	p.U16(m.CPUsPerTask)
	p.U16(m.RestartCnt)
	p.U16(m.JobCoreSpec)
	p.U32(uint32(len(m.CPUsPerNode)))
	if len(m.CPUsPerNode) > 0 {
		p.U16Array(m.CPUsPerNode)
		p.U32Array(m.CPUCountReps)
	}
	if v == Version2205 {
		p.Str(m.AliasList)
	}
	p.Str(m.CPUBind)
	p.Str(m.Nodes)
	p.Str(m.Script)
	p.Str(m.WorkDir)
	p.Str(m.StdErr)
	p.Str(m.StdIn)
	p.Str(m.StdOut)
	p.U32(uint32(len(m.Argv)))
	p.StrArray(m.Argv)
	p.StrArray(m.SpankJobEnv)
	p.U32(uint32(len(m.Environment)))
	p.StrArray(m.Environment)
	p.U64(m.JobMem)
	cv := m.CredVersion
	if cv == 0 {
		cv = v
	}
	p.U16(cv)
	if err := PackCred(p, cv, m.Cred); err != nil {
		return err
	}
	if v == Version2205 {
		p.U32(m.SelectPluginID)
	}
	p.Str(m.Account)
	p.Str(m.QOS)
	p.Str(m.ResvName)
	p.U32(m.Profile)
	p.Str(m.TresBind)
	p.Str(m.TresFreq)
	if v >= Version2411 {
		if v >= Version2605 {
			p.Str(m.TresPerTask)
		}
		p.U32(m.CPUFreqMin)
		p.U32(m.CPUFreqMax)
		p.U32(m.CPUFreqGov)
		p.Bool(m.OOMKillStep)
	}
	return nil
}

func decBatchLaunch(u *Unpacker, v uint16, _ MsgType, m *BatchJobLaunch) error {
	if v < Version2605 {
		m.JobID, _ = u.U32()
	}
	m.HetJobID, _ = u.U32()
	if v == Version2205 {
		m.UID, _ = u.U32()
		m.GID, _ = u.U32()
		m.UserName, _ = u.Str()
	}
	m.Gids, _ = u.U32Array()
	m.Partition, _ = u.Str()
	m.NTasks, _ = u.U32()
	m.PnMinMemory, _ = u.U64()
	m.OpenMode, _ = u.U8()
	m.Overcommit, _ = u.U8()
	m.ArrayJobID, _ = u.U32()
	m.ArrayTaskID, _ = u.U32()
	m.AcctgFreq, _ = u.Str()
	m.Container, _ = u.Str()
	m.CPUBindType, _ = u.U16()
	m.CPUsPerTask, _ = u.U16()
	m.RestartCnt, _ = u.U16()
	m.JobCoreSpec, _ = u.U16()
	groups, err := u.U32()
	if err != nil {
		return err
	}
	if groups > 0 {
		m.CPUsPerNode, _ = u.U16Array()
		m.CPUCountReps, _ = u.U32Array()
		if err := checkLens(u, "num_cpu_groups", int(groups), len(m.CPUsPerNode), len(m.CPUCountReps)); err != nil {
			return err
		}
	}
	if v == Version2205 {
		m.AliasList, _ = u.Str()
	}
	m.CPUBind, _ = u.Str()
	m.Nodes, _ = u.Str()
	m.Script, _ = u.Str()
	m.WorkDir, _ = u.Str()
	m.StdErr, _ = u.Str()
	m.StdIn, _ = u.Str()
	m.StdOut, _ = u.Str()
	m.Argv, _ = countedStrArray(u, "argc")
	m.SpankJobEnv, _ = u.StrArray()
	m.Environment, _ = countedStrArray(u, "envc")
	m.JobMem, _ = u.U64()
	m.CredVersion, err = u.U16()
	if err != nil {
		return err
	}
	if m.Cred, err = DecodeCred(u, m.CredVersion); err != nil {
		return err
	}
	if v == Version2205 {
		m.SelectPluginID, _ = u.U32()
	}
	m.Account, _ = u.Str()
	m.QOS, _ = u.Str()
	m.ResvName, _ = u.Str()
	m.Profile, _ = u.U32()
	m.TresBind, _ = u.Str()
	m.TresFreq, _ = u.Str()
	if v >= Version2411 {
		if v >= Version2605 {
			m.TresPerTask, _ = u.Str()
			m.JobID = m.Cred.StepID.JobID
		}
		m.CPUFreqMin, _ = u.U32()
		m.CPUFreqMax, _ = u.U32()
		m.CPUFreqGov, _ = u.U32()
		m.OOMKillStep, _ = u.Bool()
		m.UID, m.GID = m.Cred.UID, m.Cred.GID
	}
	return nil
}

// countedStrArray reads the "u32 n; strarr (u32 n, n × str)" pairs of the
// batch launch (argc/argv, envc/environment). C keeps the second count;
// the two differ only in forged input, which is rejected.
func countedStrArray(u *Unpacker, what string) ([]string, error) {
	n, err := u.U32()
	if err != nil {
		return nil, err
	}
	a, err := u.StrArray()
	if err != nil {
		return nil, err
	}
	if uint32(len(a)) != n {
		return nil, u.Fail(fmt.Errorf("%w: %s %d but array of %d", ErrMalformed, what, n, len(a)))
	}
	return a, nil
}

// KillJob is kill_job_msg_t: REQUEST_TERMINATE_JOB, REQUEST_KILL_TIMELIMIT,
// REQUEST_KILL_PREEMPTED and REQUEST_ABORT_JOB (ctld → slurmd).
//
// Layouts: 22.05 is the full field list; 21.08 starts at GresJobAlloc
// (no cred, details, derived_ec or exit_code; ExitCode decodes as Infinite
// as in C); 20.11 also lacks WorkDir. 24.11 drops select_jobinfo; 26.05
// (25.05) packs GresJobAlloc as a slurm_pack_list (u32 count, NoVal for
// none) instead of a u16 record count.
type KillJob struct {
	// Type selects the message type; zero means REQUEST_TERMINATE_JOB.
	Type MsgType
	// HasCred is the u8 before the credential. Decoding sets it with Cred;
	// encoding packs Cred when it is non-nil, and HasCred without a Cred
	// is an error.
	HasCred   bool
	Cred      *Cred // unsigned (empty Signature), step id NoVal; no step hostlist, step bitmap or memory
	Details   string
	DerivedEC uint32
	ExitCode  uint32 // raw wait status of the batch script
	// GresJobAlloc is the raw gres_job_alloc_pack / gres_prep list as it is
	// on the wire at the message's version (u16 rec_cnt + records, or from
	// 26.05 u32 count + records); nil packs as "no GRES" in either form.
	GresJobAlloc   []byte
	StepID         StepID // step NoVal: the whole job
	HetJobID       uint32
	JobState       uint32 // enum job_states plus flags
	JobUID         uint32
	JobGID         uint32
	Nodes          string
	SelectPluginID uint32 // before 24.11
	SpankJobEnv    []string
	StartTime      time.Time
	Time           time.Time // when ctld issued the request
	WorkDir        string
}

// MsgType implements Body.
func (b KillJob) MsgType() MsgType {
	if b.Type == 0 {
		return RequestTerminateJob
	}
	return b.Type
}

// packGresPrep and unpackGresPrep handle the prolog/epilog GRES list of
// kill and prolog messages in the form of version v.
func packGresPrep(p *Packer, v uint16, raw []byte) error {
	if v >= Version2605 {
		return packGresList(p, v, "gres prep", raw, skipGresJobAllocRec)
	}
	return packGres(p, v, "gres job alloc", raw, skipGresJobAllocRec)
}

func unpackGresPrep(u *Unpacker, v uint16) ([]byte, error) {
	if v >= Version2605 {
		return rawGresList(u, v, skipGresJobAllocRec)
	}
	return rawGres(u, v, skipGresJobAllocRec)
}

func encKillJob(p *Packer, v uint16, m *KillJob) error {
	if v >= Version2205 {
		switch {
		case m.Cred != nil:
			p.U8(1)
			if err := PackCred(p, v, m.Cred); err != nil {
				return err
			}
		case m.HasCred:
			return fmt.Errorf("%w: kill_job HasCred without a Cred", ErrMalformed)
		default:
			p.U8(0)
		}
		p.Str(m.Details)
		p.U32(m.DerivedEC)
		p.U32(m.ExitCode)
	}
	if err := packGresPrep(p, v, m.GresJobAlloc); err != nil {
		return err
	}
	p.StepID(v, m.StepID)
	p.U32(m.HetJobID)
	p.U32(m.JobState)
	p.U32(m.JobUID)
	p.U32(m.JobGID)
	p.Str(m.Nodes)
	if v < Version2411 {
		p.U32(m.SelectPluginID)
	}
	p.StrArray(m.SpankJobEnv)
	p.Time(m.StartTime)
	p.Time(m.Time)
	if v >= Version2108 {
		p.Str(m.WorkDir)
	}
	return nil
}

func decKillJob(u *Unpacker, v uint16, t MsgType, m *KillJob) error {
	m.Type = t
	if v >= Version2205 {
		has, err := u.U8()
		if err != nil {
			return err
		}
		if has != 0 {
			m.HasCred = true
			if m.Cred, err = DecodeCred(u, v); err != nil {
				return err
			}
		}
		m.Details, _ = u.Str()
		m.DerivedEC, _ = u.U32()
		m.ExitCode, _ = u.U32()
	} else {
		m.ExitCode = Infinite
	}
	m.GresJobAlloc, _ = unpackGresPrep(u, v)
	m.StepID, _ = u.StepID(v)
	m.HetJobID, _ = u.U32()
	m.JobState, _ = u.U32()
	m.JobUID, _ = u.U32()
	m.JobGID, _ = u.U32()
	m.Nodes, _ = u.Str()
	if v < Version2411 {
		m.SelectPluginID, _ = u.U32()
	}
	m.SpankJobEnv, _ = u.StrArray()
	m.StartTime, _ = u.Time()
	m.Time, _ = u.Time()
	if v >= Version2108 {
		m.WorkDir, _ = u.Str()
	}
	return nil
}

// SignalTasks is signal_tasks_msg_t: REQUEST_SIGNAL_TASKS or
// REQUEST_TERMINATE_TASKS. For job-wide signals ctld puts a dummy step id
// (MaxStepCount+1, 40001 by default) and flags such as KillFullJob.
type SignalTasks struct {
	// Type selects the message type; zero means REQUEST_SIGNAL_TASKS.
	Type   MsgType
	StepID StepID
	Flags  uint16 // Kill* flags
	Signal uint16
}

// MsgType implements Body.
func (b SignalTasks) MsgType() MsgType {
	if b.Type == 0 {
		return RequestSignalTasks
	}
	return b.Type
}

// JobNotify is REQUEST_JOB_NOTIFY (scontrol notify): the batch stepd writes
// Message to the job's stderr. ctld sends it without waiting for a reply.
type JobNotify struct {
	StepID  StepID
	Message string
}

// MsgType implements Body.
func (JobNotify) MsgType() MsgType { return RequestJobNotify }

// LaunchProlog is REQUEST_LAUNCH_PROLOG (ctld → every node of a job with
// PrologFlags=Alloc/Contain/X11). 24.11 dropped alias_list (a NULL
// placeholder), std_err, std_out and the trailing user_name, and added the
// stepmgr job buffers' flag; 26.05 (25.05/25.11) adds alloc_tls_cert in
// front, drops job_id (the credential's step id has it; decoding fills
// JobID from it) and the placeholder.
type LaunchProlog struct {
	AllocTLSCert string // 26.05
	// GresJobAlloc is the raw gres prep list in the message version's form
	// (see KillJob.GresJobAlloc).
	GresJobAlloc []byte
	JobID        uint32
	HetJobID     uint32
	UID          uint32
	GID          uint32
	AliasList    string // 22.05
	Nodes        string
	StdErr       string // 22.05
	StdOut       string // 22.05
	WorkDir      string
	X11Forwarding
	SpankJobEnv []string
	Cred        *Cred  // unsigned, step id StepIDExtern; no cred_version: packed at the message version
	UserName    string // 22.05
	// StepmgrJob (24.11+) is set only when slurmctld hands the job's step
	// management to this node (SlurmctldParameters=enable_stepmgr or
	// --stepmgr, first node only): the packed job record, node array and
	// partition that follow the flag, kept opaque. They end the message
	// (packbuf writes no length), so the rest of the body is theirs.
	StepmgrJob []byte
}

// MsgType implements Body.
func (LaunchProlog) MsgType() MsgType { return RequestLaunchProlog }

// CompleteProlog is REQUEST_COMPLETE_PROLOG (slurmd → ctld after the
// prolog). NodeName is not on the wire before 22.05; 26.05 (25.11) sends a
// step id instead of the job id.
type CompleteProlog struct {
	JobID    uint32
	StepID   StepID // 26.05 (JobID filled from it)
	NodeName string
	PrologRC uint32
}

// MsgType implements Body.
func (CompleteProlog) MsgType() MsgType { return RequestCompleteProlog }

// CompleteBatchScript is REQUEST_COMPLETE_BATCH_SCRIPT (batch stepd → ctld).
//
// 26.05 (25.11) replaces job_id by a step id after slurm_rc.
type CompleteBatchScript struct {
	JobAcct  *JobAcct // nil: u8 0 (jobacct_gather/none)
	JobID    uint32
	StepID   StepID // 26.05 (JobID filled from it)
	JobRC    uint32 // raw wait status (exit 3 -> 0x300)
	SlurmRC  uint32 // non-zero: launch failure, ctld drains the node
	UserID   uint32
	NodeName string
}

// MsgType implements Body.
func (CompleteBatchScript) MsgType() MsgType { return RequestCompleteBatchScript }

// JobRequeue is requeue_msg_t, REQUEST_JOB_REQUEUE (slurmd → ctld after a
// failed launch).
//
// 26.05 (25.11) sends a step id instead of the job id.
type JobRequeue struct {
	JobID    uint32
	StepID   StepID // 26.05 (JobID filled from it)
	JobIDStr string
	Flags    uint32 // JOB_* state flags, e.g. JOB_LAUNCH_FAILED 0x100
}

// MsgType implements Body.
func (JobRequeue) MsgType() MsgType { return RequestJobRequeue }

// StepComplete is REQUEST_STEP_COMPLETE (stepd → ctld or parent slurmd).
// RangeFirst..RangeLast are node ranks in the step.
type StepComplete struct {
	StepID        StepID
	RangeFirst    uint32
	RangeLast     uint32
	StepRC        uint32
	JobAcct       *JobAcct
	SendToStepmgr bool // 24.11 (24.05)
}

// MsgType implements Body.
func (StepComplete) MsgType() MsgType { return RequestStepComplete }

// SuspendInt is REQUEST_SUSPEND_INT (ctld → slurmd). Up to 22.05 the switch
// plugin's suspend info follows (switch/none packs nothing, which is all
// this codec supports); 24.11 (23.11) sends only job_id and op, and 26.05
// (25.11) a step id instead of the job id.
type SuspendInt struct {
	IndfSusp    bool   // 22.05: suspended indefinitely (gang scheduling: false)
	JobCoreSpec uint16 // 22.05
	JobID       uint32
	StepID      StepID // 26.05 (JobID filled from it)
	Op          uint16 // SuspendJob or ResumeJob
}

// MsgType implements Body.
func (SuspendInt) MsgType() MsgType { return RequestSuspendInt }

// KillJobRequest is REQUEST_KILL_JOB (slurm_kill_job, scancel): signal a
// job, named by SJobID ("1234"; StepID all NO_VAL) or by StepID.
type KillJobRequest struct {
	StepID  StepID
	SJobID  string
	Sibling string
	Signal  uint16
	Flags   uint16 // KILL_JOB_BATCH, KILL_ARRAY_TASK (24.11 on), ...
}

// MsgType implements Body.
func (KillJobRequest) MsgType() MsgType { return RequestKillJob }

// packJobStepKill and unpackJobStepKill are job_step_kill_msg_t, the body of
// REQUEST_KILL_JOB and of REQUEST_CANCEL_JOB_STEP (JobStepKill).
func packJobStepKill(p *Packer, v uint16, m *KillJobRequest) error {
	p.StepID(v, m.StepID)
	p.Str(m.SJobID)
	p.Str(m.Sibling)
	p.U16(m.Signal)
	p.U16(m.Flags)
	return nil
}

func unpackJobStepKill(u *Unpacker, v uint16, _ MsgType, m *KillJobRequest) error {
	m.StepID, _ = u.StepID(v)
	m.SJobID, _ = u.Str()
	m.Sibling, _ = u.Str()
	m.Signal, _ = u.U16()
	m.Flags, _ = u.U16()
	return nil
}

// NetworkCallerID is REQUEST_NETWORK_CALLERID (pam_slurm_adopt, scontrol
// callerid): which job holds this TCP connection. Src is this node's end,
// Dst the asker's; addresses are in network order, 4 bytes used for
// AF_INET (2), 16 for AF_INET6 (10).
type NetworkCallerID struct {
	IPSrc, IPDst     [16]byte
	PortSrc, PortDst uint32
	AF               uint32
}

// MsgType implements Body.
func (NetworkCallerID) MsgType() MsgType { return RequestNetworkCallerid }

// NetworkCallerIDResponse is RESPONSE_NETWORK_CALLERID: JobID NoVal when
// no job was found (26.05, 25.11: a step id, JobID filled from it). Stock
// never sets RC: it is 0.
type NetworkCallerIDResponse struct {
	JobID    uint32
	StepID   StepID // 26.05
	RC       uint32
	NodeName string
}

// MsgType implements Body.
func (NetworkCallerIDResponse) MsgType() MsgType { return ResponseNetworkCallerid }

// JobIDRequest is REQUEST_JOB_ID: which job does this pid belong to.
type JobIDRequest struct{ PID uint32 }

// MsgType implements Body.
func (JobIDRequest) MsgType() MsgType { return RequestJobID }

// JobID is RESPONSE_JOB_ID; 26.05 (25.11) answers with a step id.
type JobID struct {
	JobID  uint32
	StepID StepID // 26.05 (JobID filled from it)
	RC     uint32
}

// MsgType implements Body.
func (JobID) MsgType() MsgType { return ResponseJobID }

// jobOrStep packs the job id as a u32 before 26.05 and as a step id from
// 26.05 (25.11) on; unpackJobOrStep is its reader, filling both.
func jobOrStep(p *Packer, v uint16, job uint32, id StepID) {
	if v >= Version2605 {
		p.StepID(v, jobAsStepID(job, id))
		return
	}
	p.U32(job)
}

func unpackJobOrStep(u *Unpacker, v uint16) (uint32, StepID) {
	if v >= Version2605 {
		id, _ := u.StepID(v)
		return id.JobID, id
	}
	job, _ := u.U32()
	return job, StepID{}
}

func encLaunchProlog(p *Packer, v uint16, m *LaunchProlog) error {
	if m.StepmgrJob != nil && v < Version2411 {
		return fmt.Errorf("%w: stepmgr job buffers in a Slurm %s prolog launch", ErrMalformed, ReleaseName(v))
	}
	if v >= Version2605 {
		p.Str(m.AllocTLSCert)
	}
	if err := packGresPrep(p, v, m.GresJobAlloc); err != nil {
		return err
	}
	if v < Version2605 {
		p.U32(m.JobID)
	}
	p.U32(m.HetJobID)
	p.U32(m.UID)
	p.U32(m.GID)
	switch v {
	case Version2205:
		p.Str(m.AliasList)
	case Version2411:
		p.Str("") // the alias_list placeholder
	}
	p.Str(m.Nodes)
	if v == Version2205 {
		p.Str(m.StdErr)
		p.Str(m.StdOut)
	}
	p.Str(m.WorkDir)
	m.X11Forwarding.pack(p)
	p.StrArray(m.SpankJobEnv)
	if err := PackCred(p, v, m.Cred); err != nil {
		return err
	}
	if v == Version2205 {
		p.Str(m.UserName)
	} else {
		p.Bool(len(m.StepmgrJob) > 0)
		p.Raw(m.StepmgrJob)
	}
	return nil
}

func decLaunchProlog(u *Unpacker, v uint16, _ MsgType, m *LaunchProlog) error {
	if v >= Version2605 {
		m.AllocTLSCert, _ = u.Str()
	}
	m.GresJobAlloc, _ = unpackGresPrep(u, v)
	if v < Version2605 {
		m.JobID, _ = u.U32()
	}
	m.HetJobID, _ = u.U32()
	m.UID, _ = u.U32()
	m.GID, _ = u.U32()
	switch v {
	case Version2205:
		m.AliasList, _ = u.Str()
	case Version2411:
		if alias, _ := u.Str(); alias != "" && u.Err() == nil {
			return u.Fail(fmt.Errorf("%w: prolog launch alias_list placeholder %q", ErrMalformed, alias))
		}
	}
	m.Nodes, _ = u.Str()
	if v == Version2205 {
		m.StdErr, _ = u.Str()
		m.StdOut, _ = u.Str()
	}
	m.WorkDir, _ = u.Str()
	m.X11Forwarding.unpack(u)
	m.SpankJobEnv, _ = u.StrArray()
	if u.Err() != nil {
		return u.Err()
	}
	var err error
	if m.Cred, err = DecodeCred(u, v); err != nil {
		return err
	}
	if v == Version2205 {
		m.UserName, _ = u.Str()
		return nil
	}
	if v >= Version2605 {
		m.JobID = m.Cred.StepID.JobID
	}
	has, err := u.Bool()
	if err != nil || !has {
		return err
	}
	if u.Remaining() == 0 {
		return u.Fail(fmt.Errorf("%w: prolog launch flags stepmgr job buffers but has none", ErrMalformed))
	}
	m.StepmgrJob, err = u.Raw(u.Remaining())
	m.StepmgrJob = append([]byte(nil), m.StepmgrJob...)
	return err
}

func init() {
	RegisterBody(RequestBatchJobLaunch, typedCodec(spoken, encBatchLaunch, decBatchLaunch))

	// kill_job_msg: the 20.11 and 21.08 layouts a 22.05 controller may
	// send, and the spoken releases.
	register(typedCodec(legacyAndSpoken, encKillJob, decKillJob),
		RequestTerminateJob, RequestKillTimelimit, RequestKillPreempted, RequestAbortJob)

	register(typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *SignalTasks) error {
			p.StepID(v, m.StepID)
			p.U16(m.Flags)
			p.U16(m.Signal)
			return nil
		},
		func(u *Unpacker, v uint16, t MsgType, m *SignalTasks) error {
			m.Type = t
			m.StepID, _ = u.StepID(v)
			m.Flags, _ = u.U16()
			m.Signal, _ = u.U16()
			return nil
		}),
		RequestSignalTasks, RequestTerminateTasks)

	RegisterBody(RequestJobNotify, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *JobNotify) error {
			p.StepID(v, m.StepID)
			p.Str(m.Message)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *JobNotify) error {
			m.StepID, _ = u.StepID(v)
			m.Message, _ = u.Str()
			return nil
		}))

	RegisterBody(RequestLaunchProlog, typedCodec(spoken, encLaunchProlog, decLaunchProlog))

	RegisterBody(RequestCompleteProlog, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *CompleteProlog) error {
			jobOrStep(p, v, m.JobID, m.StepID)
			if v >= Version2205 {
				p.Str(m.NodeName)
			}
			p.U32(m.PrologRC)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *CompleteProlog) error {
			m.JobID, m.StepID = unpackJobOrStep(u, v)
			if v >= Version2205 {
				m.NodeName, _ = u.Str()
			}
			m.PrologRC, _ = u.U32()
			return nil
		}))

	RegisterBody(RequestCompleteBatchScript, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *CompleteBatchScript) error {
			packJobAcct(p, v, m.JobAcct)
			if v < Version2605 {
				p.U32(m.JobID)
			}
			p.U32(m.JobRC)
			p.U32(m.SlurmRC)
			if v >= Version2605 {
				id := m.StepID
				if id.JobID == 0 {
					id = StepID{JobID: m.JobID, StepID: StepIDBatch, StepHetComp: NoVal}
				}
				p.StepID(v, id)
			}
			p.U32(m.UserID)
			p.Str(m.NodeName)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *CompleteBatchScript) error {
			m.JobAcct, _ = unpackJobAcct(u, v)
			if v < Version2605 {
				m.JobID, _ = u.U32()
			}
			m.JobRC, _ = u.U32()
			m.SlurmRC, _ = u.U32()
			if v >= Version2605 {
				m.StepID, _ = u.StepID(v)
				m.JobID = m.StepID.JobID
			}
			m.UserID, _ = u.U32()
			m.NodeName, _ = u.Str()
			return nil
		}))

	RegisterBody(RequestJobRequeue, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *JobRequeue) error {
			jobOrStep(p, v, m.JobID, m.StepID)
			p.Str(m.JobIDStr)
			p.U32(m.Flags)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *JobRequeue) error {
			m.JobID, m.StepID = unpackJobOrStep(u, v)
			m.JobIDStr, _ = u.Str()
			m.Flags, _ = u.U32()
			return nil
		}))

	RegisterBody(RequestStepComplete, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *StepComplete) error {
			p.StepID(v, m.StepID)
			p.U32(m.RangeFirst)
			p.U32(m.RangeLast)
			p.U32(m.StepRC)
			packJobAcct(p, v, m.JobAcct)
			if v >= Version2411 {
				p.Bool(m.SendToStepmgr)
			}
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *StepComplete) error {
			m.StepID, _ = u.StepID(v)
			m.RangeFirst, _ = u.U32()
			m.RangeLast, _ = u.U32()
			m.StepRC, _ = u.U32()
			m.JobAcct, _ = unpackJobAcct(u, v)
			if v >= Version2411 {
				m.SendToStepmgr, _ = u.Bool()
			}
			return nil
		}))

	RegisterBody(RequestSuspendInt, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *SuspendInt) error {
			if v < Version2411 {
				p.Bool(m.IndfSusp)
				p.U16(m.JobCoreSpec)
			}
			jobOrStep(p, v, m.JobID, m.StepID)
			p.U16(m.Op)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *SuspendInt) error {
			if v < Version2411 {
				m.IndfSusp, _ = u.Bool()
				m.JobCoreSpec, _ = u.U16()
			}
			m.JobID, m.StepID = unpackJobOrStep(u, v)
			m.Op, _ = u.U16()
			return nil
		}))

	RegisterBody(RequestKillJob, typedCodec(legacyAndSpoken, packJobStepKill, unpackJobStepKill))

	RegisterBody(RequestNetworkCallerid, typedCodec(legacyAndSpoken,
		func(p *Packer, _ uint16, m *NetworkCallerID) error {
			p.Mem(m.IPSrc[:])
			p.Mem(m.IPDst[:])
			p.U32(m.PortSrc)
			p.U32(m.PortDst)
			p.U32(m.AF)
			return nil
		},
		func(u *Unpacker, _ uint16, _ MsgType, m *NetworkCallerID) error {
			for _, ip := range []*[16]byte{&m.IPSrc, &m.IPDst} {
				b, err := u.Mem()
				if err != nil {
					return err
				}
				if len(b) > len(ip) {
					return u.Fail(fmt.Errorf("network callerid: address of %d bytes, at most %d", len(b), len(ip)))
				}
				copy(ip[:], b)
			}
			m.PortSrc, _ = u.U32()
			m.PortDst, _ = u.U32()
			m.AF, _ = u.U32()
			return nil
		}))

	RegisterBody(ResponseNetworkCallerid, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *NetworkCallerIDResponse) error {
			jobOrStep(p, v, m.JobID, m.StepID)
			p.U32(m.RC)
			p.Str(m.NodeName)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *NetworkCallerIDResponse) error {
			m.JobID, m.StepID = unpackJobOrStep(u, v)
			m.RC, _ = u.U32()
			m.NodeName, _ = u.Str()
			return nil
		}))

	RegisterBody(RequestJobID, typedCodec(legacyAndSpoken,
		func(p *Packer, _ uint16, m *JobIDRequest) error { p.U32(m.PID); return nil },
		func(u *Unpacker, _ uint16, _ MsgType, m *JobIDRequest) error { m.PID, _ = u.U32(); return nil }))

	RegisterBody(ResponseJobID, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *JobID) error {
			jobOrStep(p, v, m.JobID, m.StepID)
			p.U32(m.RC)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *JobID) error {
			m.JobID, m.StepID = unpackJobOrStep(u, v)
			m.RC, _ = u.U32()
			return nil
		}))
}
