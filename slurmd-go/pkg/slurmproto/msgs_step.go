package slurmproto

import (
	"fmt"
	"strings"
)

// Step-related bodies needed to parse ret_lists of forwarded step RPCs
// (reference §2C). Layouts from Slurm 22.05.8 slurm_protocol_pack.c and
// slurm_jobacct_gather.c.

// StepID is slurm_step_id_t: u32 job_id, u32 step_id, u32 step_het_comp
// (NoVal when not a het step), and from 24.11 on a leading u64 sluid (the
// cluster-unique id 26.05 assigns; 24.11 sends 0).
type StepID struct {
	JobID       uint32
	StepID      uint32
	StepHetComp uint32
	SLUID       uint64
}

// Key is the id without its SLUID: what identifies a step on the node
// across messages of any release.
func (s StepID) Key() StepID { s.SLUID = 0; return s }

// StepIDMsg is the body of messages that carry only a step id:
// REQUEST_JOB_STEP_STAT, REQUEST_JOB_STEP_PIDS, REQUEST_STEP_LAYOUT,
// SRUN_JOB_COMPLETE.
type StepIDMsg struct {
	Type MsgType
	StepID
}

// MsgType implements Body.
func (b StepIDMsg) MsgType() MsgType { return b.Type }

// JobAcct is jobacctinfo_t as packed by jobacctinfo_pack for
// PROTOCOL_TYPE_SLURM. A nil *JobAcct packs as u8 0, which is what daemons
// with JobAcctGatherType=jobacct_gather/none send.
type JobAcct struct {
	UserCPUSec     uint64 // u32 on the wire before 21.08
	UserCPUUsec    uint32
	SysCPUSec      uint64 // u32 on the wire before 21.08
	SysCPUUsec     uint32
	ActCPUFreq     uint32
	ConsumedEnergy uint64
	TRESIDs        []uint32
	// TRESList: nil packs as a NULL list (NoVal).
	TRESList []TRESRec
	// Usage holds the 14 tres_usage_* arrays in wire order: in_max,
	// in_max_nodeid, in_max_taskid, in_min, in_min_nodeid, in_min_taskid,
	// in_tot, out_max, out_max_nodeid, out_max_taskid, out_min,
	// out_min_nodeid, out_min_taskid, out_tot.
	Usage [14][]uint64
}

func packJobAcct(p *Packer, v uint16, j *JobAcct) {
	if j == nil {
		p.U8(0)
		return
	}
	p.U8(1)
	if v >= Version2108 {
		p.U64(j.UserCPUSec)
		p.U32(j.UserCPUUsec)
		p.U64(j.SysCPUSec)
		p.U32(j.SysCPUUsec)
	} else {
		// 20.11 clamps seconds above NO_VAL to NO_VAL.
		p.U32(uint32(min(j.UserCPUSec, uint64(NoVal))))
		p.U32(j.UserCPUUsec)
		p.U32(uint32(min(j.SysCPUSec, uint64(NoVal))))
		p.U32(j.SysCPUUsec)
	}
	p.U32(j.ActCPUFreq)
	p.U64(j.ConsumedEnergy)
	p.U32Array(j.TRESIDs)
	packTRESList(p, j.TRESList)
	for _, a := range j.Usage {
		p.U64Array(a)
	}
}

func unpackJobAcct(u *Unpacker, v uint16) (*JobAcct, error) {
	present, err := u.U8()
	if err != nil || present == 0 {
		return nil, err
	}
	j := new(JobAcct)
	if v >= Version2108 {
		j.UserCPUSec, _ = u.U64()
		j.UserCPUUsec, _ = u.U32()
		j.SysCPUSec, _ = u.U64()
		j.SysCPUUsec, _ = u.U32()
	} else {
		s, _ := u.U32()
		j.UserCPUSec = uint64(s)
		j.UserCPUUsec, _ = u.U32()
		s, _ = u.U32()
		j.SysCPUSec = uint64(s)
		j.SysCPUUsec, _ = u.U32()
	}
	j.ActCPUFreq, _ = u.U32()
	j.ConsumedEnergy, _ = u.U64()
	j.TRESIDs, _ = u.U32Array()
	j.TRESList, _ = unpackTRESList(u)
	for i := range j.Usage {
		j.Usage[i], _ = u.U64Array()
	}
	return j, u.Err()
}

// JobStepPidsResponse is RESPONSE_JOB_STEP_PIDS: str node_name, arr32 pids.
type JobStepPidsResponse struct {
	NodeName string
	PIDs     []uint32
}

// MsgType implements Body.
func (JobStepPidsResponse) MsgType() MsgType { return ResponseJobStepPids }

// JobStepStatResponse is RESPONSE_JOB_STEP_STAT: u32 rc, u32 num_tasks,
// jobacct, then a job_step_pids (a NULL one packs like an empty one).
type JobStepStatResponse struct {
	RC       uint32
	NumTasks uint32
	JobAcct  *JobAcct
	Pids     JobStepPidsResponse
}

// MsgType implements Body.
func (JobStepStatResponse) MsgType() MsgType { return ResponseJobStepStat }

// ReattachTasksResponse is RESPONSE_REATTACH_TASKS. GTIDs, LocalPIDs and
// Executables must have the same length (ntasks).
type ReattachTasksResponse struct {
	NodeName    string
	RC          uint32
	GTIDs       []uint32
	LocalPIDs   []uint32
	Executables []string
}

// MsgType implements Body.
func (ReattachTasksResponse) MsgType() MsgType { return ResponseReattachTasks }

func init() {
	register(typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *StepIDMsg) error { p.StepID(v, m.StepID); return nil },
		func(u *Unpacker, v uint16, t MsgType, m *StepIDMsg) error {
			m.Type = t
			m.StepID, _ = u.StepID(v)
			return nil
		}),
		RequestJobStepStat, RequestJobStepPids, RequestStepLayout, SrunJobComplete)

	RegisterBody(ResponseJobStepPids, typedCodec(legacyAndSpoken,
		func(p *Packer, _ uint16, m *JobStepPidsResponse) error {
			p.Str(m.NodeName)
			p.U32Array(m.PIDs)
			return nil
		},
		func(u *Unpacker, _ uint16, _ MsgType, m *JobStepPidsResponse) error {
			m.NodeName, _ = u.Str()
			m.PIDs, _ = u.U32Array()
			return nil
		}))

	RegisterBody(ResponseJobStepStat, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *JobStepStatResponse) error {
			p.U32(m.RC)
			p.U32(m.NumTasks)
			packJobAcct(p, v, m.JobAcct)
			p.Str(m.Pids.NodeName)
			p.U32Array(m.Pids.PIDs)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *JobStepStatResponse) error {
			m.RC, _ = u.U32()
			m.NumTasks, _ = u.U32()
			m.JobAcct, _ = unpackJobAcct(u, v)
			m.Pids.NodeName, _ = u.Str()
			m.Pids.PIDs, _ = u.U32Array()
			return nil
		}))

	RegisterBody(ResponseReattachTasks, typedCodec(legacyAndSpoken,
		func(p *Packer, _ uint16, m *ReattachTasksResponse) error {
			n := len(m.GTIDs)
			if len(m.LocalPIDs) != n || len(m.Executables) != n {
				return fmt.Errorf("%w: reattach response arrays differ in length (%d, %d, %d)",
					ErrMalformed, n, len(m.LocalPIDs), len(m.Executables))
			}
			p.Str(m.NodeName)
			p.U32(m.RC)
			p.U32(uint32(n))
			p.U32Array(m.GTIDs)
			p.U32Array(m.LocalPIDs)
			for _, e := range m.Executables {
				p.Str(e)
			}
			return nil
		},
		func(u *Unpacker, _ uint16, _ MsgType, m *ReattachTasksResponse) error {
			m.NodeName, _ = u.Str()
			m.RC, _ = u.U32()
			ntasks, _ := u.U32()
			m.GTIDs, _ = u.U32Array()
			m.LocalPIDs, _ = u.U32Array()
			if u.Err() != nil {
				return u.Err()
			}
			if uint32(len(m.GTIDs)) != ntasks || uint32(len(m.LocalPIDs)) != ntasks {
				return u.Fail(fmt.Errorf("%w: reattach ntasks %d but arrays of %d and %d",
					ErrMalformed, ntasks, len(m.GTIDs), len(m.LocalPIDs)))
			}
			if ntasks > 0 {
				m.Executables = make([]string, ntasks)
				for i := range m.Executables {
					m.Executables[i], _ = u.Str()
				}
			}
			return nil
		}))
}

// crockford32 is the digit set of print_sluid (Crockford's base 32).
const crockford32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// FormatSLUID prints a SLUID as 26.05 does (print_sluid, SLURM_JOB_SLUID):
// "s" and 13 base-32 digits, most significant first (the top one holds the
// last 4 bits).
func FormatSLUID(sluid uint64) string {
	var b [14]byte
	b[0] = 's'
	for i := 0; i < 13; i++ {
		b[13-i] = crockford32[(sluid>>(5*uint(i)))&0x1f]
	}
	return string(b[:])
}

// ParseSLUID reads what FormatSLUID prints, as 26.05's str2sluid does: "s"
// or "S", then 13 base-32 digits in either case, O read as 0 and I or L as
// 1. Where str2sluid returns 0 for bad text (and drops a first digit's
// fifth bit), ParseSLUID fails with ErrMalformed.
func ParseSLUID(s string) (uint64, error) {
	if len(s) != 14 || (s[0] != 's' && s[0] != 'S') {
		return 0, fmt.Errorf("%w: sluid %q is not s and 13 digits", ErrMalformed, s)
	}
	var sluid uint64
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		switch c {
		case 'O':
			c = '0'
		case 'I', 'L':
			c = '1'
		}
		d := strings.IndexByte(crockford32, c)
		if d < 0 || (i == 1 && d > 0xf) {
			return 0, fmt.Errorf("%w: sluid %q: bad digit %q", ErrMalformed, s, s[i])
		}
		sluid = sluid<<5 | uint64(d)
	}
	return sluid, nil
}
