package slurmproto

import (
	"fmt"
	"time"
)

// Node lifecycle bodies (reference §2A, §2D, §3). Layouts from
// src/common/slurm_protocol_pack.c of Slurm 22.05.8.

// EmptyBody is the body of messages that carry none: REQUEST_PING,
// REQUEST_NODE_REGISTRATION_STATUS, REQUEST_RECONFIGURE,
// REQUEST_HEALTH_CHECK, REQUEST_ACCT_GATHER_UPDATE, REQUEST_DAEMON_STATUS,
// RESPONSE_FORWARD_FAILED, SRUN_PING, ...
type EmptyBody struct{ Type MsgType }

// MsgType implements Body.
func (b EmptyBody) MsgType() MsgType { return b.Type }

// ReturnCode is RESPONSE_SLURM_RC: u32 return_code.
type ReturnCode struct{ RC uint32 }

// MsgType implements Body.
func (ReturnCode) MsgType() MsgType { return ResponseSlurmRC }

// ReturnCodeMsg is RESPONSE_SLURM_RC_MSG: u32 return_code, str err_msg.
type ReturnCodeMsg struct {
	RC  uint32
	Msg string
}

// MsgType implements Body.
func (ReturnCodeMsg) MsgType() MsgType { return ResponseSlurmRCMsg }

// PingSlurmdResponse is RESPONSE_PING_SLURMD.
type PingSlurmdResponse struct {
	CPULoad  uint32 // 5-min load average * 100
	FreeMem  uint64 // MiB
	NodeName string // 26.05+
}

// MsgType implements Body.
func (PingSlurmdResponse) MsgType() MsgType { return ResponsePingSlurmd }

// Energy is acct_gather_energy_t as packed by acct_gather_energy_pack
// (40 bytes). All zero without an energy plugin.
type Energy struct {
	BaseConsumed     uint64
	AveWatts         uint32
	Consumed         uint64
	CurrentWatts     uint32
	PreviousConsumed uint64
	PollTime         time.Time
	// SlurmdStartTime is packed from 24.11 on (48 bytes then).
	SlurmdStartTime time.Time
}

// energySize is the smallest packed Energy (before 24.11).
const energySize = 40

func packEnergy(p *Packer, v uint16, e *Energy) {
	p.U64(e.BaseConsumed)
	p.U32(e.AveWatts)
	p.U64(e.Consumed)
	p.U32(e.CurrentWatts)
	p.U64(e.PreviousConsumed)
	p.Time(e.PollTime)
	if v >= Version2411 {
		p.Time(e.SlurmdStartTime)
	}
}

func unpackEnergy(u *Unpacker, v uint16, e *Energy) {
	e.BaseConsumed, _ = u.U64()
	e.AveWatts, _ = u.U32()
	e.Consumed, _ = u.U64()
	e.CurrentWatts, _ = u.U32()
	e.PreviousConsumed, _ = u.U64()
	e.PollTime, _ = u.Time()
	if v >= Version2411 {
		e.SlurmdStartTime, _ = u.Time()
	}
}

// NodeRegistrationStatus is MESSAGE_NODE_REGISTRATION_STATUS (reference §3).
// Hostname and DynamicConf exist from 22.05 on; with older versions
// DynamicType is packed as a bool. The fields marked with a release exist
// from that release on.
type NodeRegistrationStatus struct {
	Timestamp       time.Time
	SlurmdStartTime time.Time
	Status          uint32
	Extra           string // 24.11
	FeaturesActive  string
	FeaturesAvail   string
	Hostname        string // 22.05
	InstanceID      string // 24.11
	InstanceType    string // 24.11
	NodeName        string
	Arch            string
	CPUSpecList     string
	MemSpecLimit    uint64 // 26.05 (25.05), MiB
	OS              string
	Parameters      string // 26.05 (25.11)
	CPUs            uint16
	Boards          uint16
	Sockets         uint16
	Cores           uint16
	Threads         uint16
	RealMemory      uint64 // MiB
	TmpDisk         uint32 // MiB
	UpTime          uint32 // seconds since host boot
	HashVal         uint32 // slurm.conf hash; NoVal disables ctld's check
	CPULoad         uint32
	FreeMem         uint64 // MiB
	Steps           []StepID
	Flags           uint16 // RegFlag*
	// GresInfo is the raw packed gres node state (nil: size 0). With no
	// GRES slurmd sends u16 version + u16 0.
	GresInfo       []byte
	Energy         Energy
	Version        string
	DynamicType    uint8
	DynamicConf    string // 22.05+
	DynamicFeature string
}

// MsgType implements Body.
func (NodeRegistrationStatus) MsgType() MsgType { return MessageNodeRegistrationStatus }

func encNodeReg(p *Packer, v uint16, m *NodeRegistrationStatus) error {
	p.Time(m.Timestamp)
	p.Time(m.SlurmdStartTime)
	p.U32(m.Status)
	if v >= Version2411 {
		p.Str(m.Extra)
	}
	p.Str(m.FeaturesActive)
	p.Str(m.FeaturesAvail)
	if v >= Version2205 {
		p.Str(m.Hostname)
	}
	if v >= Version2411 {
		p.Str(m.InstanceID)
		p.Str(m.InstanceType)
	}
	p.Str(m.NodeName)
	p.Str(m.Arch)
	p.Str(m.CPUSpecList)
	if v >= Version2605 {
		p.U64(m.MemSpecLimit)
	}
	p.Str(m.OS)
	if v >= Version2605 {
		p.Str(m.Parameters)
	}
	p.U16(m.CPUs)
	p.U16(m.Boards)
	p.U16(m.Sockets)
	p.U16(m.Cores)
	p.U16(m.Threads)
	p.U64(m.RealMemory)
	p.U32(m.TmpDisk)
	p.U32(m.UpTime)
	p.U32(m.HashVal)
	p.U32(m.CPULoad)
	p.U64(m.FreeMem)
	p.U32(uint32(len(m.Steps)))
	for _, s := range m.Steps {
		p.StepID(v, s)
	}
	p.U16(m.Flags)
	// gres_info_size, then (again) the size as packmem's length.
	p.U32(uint32(len(m.GresInfo)))
	if len(m.GresInfo) > 0 {
		p.Mem(m.GresInfo)
	}
	packEnergy(p, v, &m.Energy)
	p.Str(m.Version)
	p.U8(m.DynamicType)
	if v >= Version2205 {
		p.Str(m.DynamicConf)
	}
	p.Str(m.DynamicFeature)
	return nil
}

func decNodeReg(u *Unpacker, v uint16, _ MsgType, m *NodeRegistrationStatus) error {
	m.Timestamp, _ = u.Time()
	m.SlurmdStartTime, _ = u.Time()
	m.Status, _ = u.U32()
	if v >= Version2411 {
		m.Extra, _ = u.Str()
	}
	m.FeaturesActive, _ = u.Str()
	m.FeaturesAvail, _ = u.Str()
	if v >= Version2205 {
		m.Hostname, _ = u.Str()
	}
	if v >= Version2411 {
		m.InstanceID, _ = u.Str()
		m.InstanceType, _ = u.Str()
	}
	m.NodeName, _ = u.Str()
	m.Arch, _ = u.Str()
	m.CPUSpecList, _ = u.Str()
	if v >= Version2605 {
		m.MemSpecLimit, _ = u.U64()
	}
	m.OS, _ = u.Str()
	if v >= Version2605 {
		m.Parameters, _ = u.Str()
	}
	m.CPUs, _ = u.U16()
	m.Boards, _ = u.U16()
	m.Sockets, _ = u.U16()
	m.Cores, _ = u.U16()
	m.Threads, _ = u.U16()
	m.RealMemory, _ = u.U64()
	m.TmpDisk, _ = u.U32()
	m.UpTime, _ = u.U32()
	m.HashVal, _ = u.U32()
	m.CPULoad, _ = u.U32()
	m.FreeMem, _ = u.U64()
	n, err := u.Count("step list", 12)
	if err != nil {
		return err
	}
	if n > 0 {
		m.Steps = make([]StepID, n)
		for i := range m.Steps {
			m.Steps[i], _ = u.StepID(v)
		}
	}
	m.Flags, _ = u.U16()
	size, err := u.U32()
	if err != nil {
		return err
	}
	if size > 0 {
		g, err := u.Mem()
		if err != nil {
			return err
		}
		if uint32(len(g)) != size {
			return u.Fail(fmt.Errorf("%w: gres_info size %d but packmem length %d", ErrMalformed, size, len(g)))
		}
		m.GresInfo = g
	}
	unpackEnergy(u, v, &m.Energy)
	m.Version, _ = u.Str()
	m.DynamicType, _ = u.U8()
	if v >= Version2205 {
		m.DynamicConf, _ = u.Str()
	}
	m.DynamicFeature, _ = u.Str()
	return nil
}

// TRESRec is slurmdb_tres_rec_t as packed by slurmdb_pack_tres_rec.
type TRESRec struct {
	AllocSecs uint64
	Count     uint64
	ID        uint32
	Name      string // NULL for cpu/mem/node/...; "disk" for fs/disk, the GRES name for gres
	Type      string // "cpu", "mem", "energy", "node", "billing", "fs", "vmem", "pages", "gres", ...
}

const tresRecMinSize = 8 + 8 + 4 + 4 + 4

func packTRESList(p *Packer, l []TRESRec) {
	p.ListLen(l == nil, len(l))
	for _, t := range l {
		p.U64(t.AllocSecs)
		p.U64(t.Count)
		p.U32(t.ID)
		p.Str(t.Name)
		p.Str(t.Type)
	}
}

func unpackTRESList(u *Unpacker) ([]TRESRec, error) {
	n, isNil, err := u.ListLen(tresRecMinSize)
	if err != nil || isNil {
		return nil, err
	}
	l := make([]TRESRec, n)
	for i := range l {
		t := &l[i]
		t.AllocSecs, _ = u.U64()
		t.Count, _ = u.U64()
		t.ID, _ = u.U32()
		t.Name, _ = u.Str()
		t.Type, _ = u.Str()
	}
	return l, u.Err()
}

// NodeRegistrationResponse is RESPONSE_NODE_REGISTRATION: slurm_pack_list of
// TRES records, then str node_name (set by ctld only for dynamic nodes).
// A nil TRES slice packs as a NULL list (count NoVal); decoding count 0
// yields a non-nil empty slice.
type NodeRegistrationResponse struct {
	TRES     []TRESRec
	NodeName string
}

// MsgType implements Body.
func (NodeRegistrationResponse) MsgType() MsgType { return ResponseNodeRegistration }

// SlurmdStatus is RESPONSE_SLURMD_STATUS (reply to REQUEST_DAEMON_STATUS).
type SlurmdStatus struct {
	Booted           time.Time
	LastSlurmctldMsg time.Time
	SlurmdDebug      uint16
	CPUs             uint16
	Boards           uint16
	Sockets          uint16
	Cores            uint16
	Threads          uint16
	RealMem          uint64 // MiB
	TmpDisk          uint32 // MiB
	PID              uint32
	Hostname         string
	Logfile          string
	StepList         string
	Version          string
}

// MsgType implements Body.
func (SlurmdStatus) MsgType() MsgType { return ResponseSlurmdStatus }

// AcctGatherEnergy is RESPONSE_ACCT_GATHER_UPDATE or
// RESPONSE_ACCT_GATHER_ENERGY: str node_name, u16 sensor_cnt, sensors.
type AcctGatherEnergy struct {
	// Type selects the message type; zero means RESPONSE_ACCT_GATHER_UPDATE.
	Type     MsgType
	NodeName string
	Sensors  []Energy
}

// MsgType implements Body.
func (b AcctGatherEnergy) MsgType() MsgType {
	if b.Type == 0 {
		return ResponseAcctGatherUpdate
	}
	return b.Type
}

// AcctGatherEnergyRequest is REQUEST_ACCT_GATHER_ENERGY.
type AcctGatherEnergyRequest struct {
	ContextID uint16
	Delta     uint16
}

// MsgType implements Body.
func (AcctGatherEnergyRequest) MsgType() MsgType { return RequestAcctGatherEnergy }

// ShutdownRequest is REQUEST_SHUTDOWN.
type ShutdownRequest struct{ Options uint16 }

// MsgType implements Body.
func (ShutdownRequest) MsgType() MsgType { return RequestShutdown }

// RebootNodesRequest is REQUEST_REBOOT_NODES.
type RebootNodesRequest struct {
	Features        string
	Flags           uint16
	NextState       uint32
	NodeList        string
	PowerActionName string // 26.05
	Reason          string
}

// NodeHealthCheck is REQUEST_NODE_HEALTH_CHECK (26.05): slurmctld's health
// check of a node that reports health (health_check_report).
type NodeHealthCheck struct{ Healthy bool }

// MsgType implements Body.
func (NodeHealthCheck) MsgType() MsgType { return RequestNodeHealthCheck }

// MsgType implements Body.
func (RebootNodesRequest) MsgType() MsgType { return RequestRebootNodes }

// SetDebugLevel is REQUEST_SET_DEBUG_LEVEL (set_debug_level_msg_t): the
// Slurm log level number (quiet 0 ... debug5 9). 24.11's scontrol sends it
// to nodes with `setdebug LEVEL nodes=`; every release packs it alike.
type SetDebugLevel struct{ Level uint32 }

// MsgType implements Body.
func (SetDebugLevel) MsgType() MsgType { return RequestSetDebugLevel }

// SetDebugFlags is REQUEST_SET_DEBUG_FLAGS (set_debug_flags_msg_t): the
// DebugFlags bits to clear, then to set (`setdebugflags -F +G nodes=`).
type SetDebugFlags struct{ Minus, Plus uint64 }

// MsgType implements Body.
func (SetDebugFlags) MsgType() MsgType { return RequestSetDebugFlags }

// EpilogComplete is MESSAGE_EPILOG_COMPLETE (slurmd → ctld). 26.05 (25.11)
// sends the job as a step id (StepID: job, NoVal, NoVal) instead of a u32;
// JobID is the job either way.
type EpilogComplete struct {
	JobID    uint32
	StepID   StepID // 26.05: packed instead of JobID (JobID filled from it)
	RC       uint32
	NodeName string
}

// MsgType implements Body.
func (EpilogComplete) MsgType() MsgType { return MessageEpilogComplete }

// jobAsStepID packs a job id the way 26.05 (25.11) does in messages that
// used to carry a bare u32: as a step id with step NoVal.
func jobAsStepID(job uint32, id StepID) StepID {
	if id.JobID == 0 && id.StepID == 0 {
		return StepID{JobID: job, StepID: NoVal, StepHetComp: NoVal}
	}
	return id
}

func init() {
	noBody := typedCodec(everyHeader,
		func(*Packer, uint16, *EmptyBody) error { return nil },
		func(_ *Unpacker, _ uint16, t MsgType, m *EmptyBody) error { m.Type = t; return nil },
	)
	// The same empty body in every release: these are what a controller
	// sends a node it has not heard from, in its own oldest version.
	register(noBody,
		RequestNodeRegistrationStatus, RequestReconfigure, RequestPing,
		RequestControl, RequestControlStatus, RequestTakeover,
		RequestDaemonStatus, RequestHealthCheck, RequestAcctGatherUpdate,
		RequestTopoInfo, RequestBurstBufferInfo, RequestFedInfo,
		SrunPing, ResponseForwardFailed)

	RegisterBody(ResponseSlurmRC, typedCodec(everyHeader,
		func(p *Packer, _ uint16, m *ReturnCode) error { p.U32(m.RC); return nil },
		func(u *Unpacker, _ uint16, _ MsgType, m *ReturnCode) error { m.RC, _ = u.U32(); return nil }))

	RegisterBody(ResponseSlurmRCMsg, typedCodec(everyHeader,
		func(p *Packer, _ uint16, m *ReturnCodeMsg) error { p.U32(m.RC); p.Str(m.Msg); return nil },
		func(u *Unpacker, _ uint16, _ MsgType, m *ReturnCodeMsg) error {
			m.RC, _ = u.U32()
			m.Msg, _ = u.Str()
			return nil
		}))

	// The reply to a ping, so at every header version too; 26.05 adds the
	// node name.
	RegisterBody(ResponsePingSlurmd, typedCodec(everyHeader,
		func(p *Packer, v uint16, m *PingSlurmdResponse) error {
			p.U32(m.CPULoad)
			p.U64(m.FreeMem)
			if v >= Version2605 {
				p.Str(m.NodeName)
			}
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *PingSlurmdResponse) error {
			m.CPULoad, _ = u.U32()
			m.FreeMem, _ = u.U64()
			if v >= Version2605 {
				m.NodeName, _ = u.Str()
			}
			return nil
		}))

	RegisterBody(RequestSetDebugLevel, typedCodec(spoken,
		func(p *Packer, _ uint16, m *SetDebugLevel) error { p.U32(m.Level); return nil },
		func(u *Unpacker, _ uint16, _ MsgType, m *SetDebugLevel) error { m.Level, _ = u.U32(); return nil }))

	RegisterBody(RequestSetDebugFlags, typedCodec(spoken,
		func(p *Packer, _ uint16, m *SetDebugFlags) error { p.U64(m.Minus); p.U64(m.Plus); return nil },
		func(u *Unpacker, _ uint16, _ MsgType, m *SetDebugFlags) error {
			m.Minus, _ = u.U64()
			m.Plus, _ = u.U64()
			return nil
		}))

	RegisterBody(RequestNodeHealthCheck, typedCodec(only2605,
		func(p *Packer, _ uint16, m *NodeHealthCheck) error { p.Bool(m.Healthy); return nil },
		func(u *Unpacker, _ uint16, _ MsgType, m *NodeHealthCheck) error { m.Healthy, _ = u.Bool(); return nil }))

	RegisterBody(MessageNodeRegistrationStatus, typedCodec(legacyAndSpoken, encNodeReg, decNodeReg))

	RegisterBody(ResponseNodeRegistration, typedCodec(legacyAndSpoken,
		func(p *Packer, _ uint16, m *NodeRegistrationResponse) error {
			packTRESList(p, m.TRES)
			p.Str(m.NodeName)
			return nil
		},
		func(u *Unpacker, _ uint16, _ MsgType, m *NodeRegistrationResponse) error {
			m.TRES, _ = unpackTRESList(u)
			m.NodeName, _ = u.Str()
			return nil
		}))

	RegisterBody(ResponseSlurmdStatus, typedCodec(legacyAndSpoken,
		func(p *Packer, _ uint16, m *SlurmdStatus) error {
			p.Time(m.Booted)
			p.Time(m.LastSlurmctldMsg)
			p.U16(m.SlurmdDebug)
			p.U16(m.CPUs)
			p.U16(m.Boards)
			p.U16(m.Sockets)
			p.U16(m.Cores)
			p.U16(m.Threads)
			p.U64(m.RealMem)
			p.U32(m.TmpDisk)
			p.U32(m.PID)
			p.Str(m.Hostname)
			p.Str(m.Logfile)
			p.Str(m.StepList)
			p.Str(m.Version)
			return nil
		},
		func(u *Unpacker, _ uint16, _ MsgType, m *SlurmdStatus) error {
			m.Booted, _ = u.Time()
			m.LastSlurmctldMsg, _ = u.Time()
			m.SlurmdDebug, _ = u.U16()
			m.CPUs, _ = u.U16()
			m.Boards, _ = u.U16()
			m.Sockets, _ = u.U16()
			m.Cores, _ = u.U16()
			m.Threads, _ = u.U16()
			m.RealMem, _ = u.U64()
			m.TmpDisk, _ = u.U32()
			m.PID, _ = u.U32()
			m.Hostname, _ = u.Str()
			m.Logfile, _ = u.Str()
			m.StepList, _ = u.Str()
			m.Version, _ = u.Str()
			return nil
		}))

	energyCodec := typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *AcctGatherEnergy) error {
			if len(m.Sensors) > 0xffff {
				return fmt.Errorf("%w: %d sensors", ErrTooLarge, len(m.Sensors))
			}
			p.Str(m.NodeName)
			p.U16(uint16(len(m.Sensors)))
			for i := range m.Sensors {
				packEnergy(p, v, &m.Sensors[i])
			}
			return nil
		},
		func(u *Unpacker, v uint16, t MsgType, m *AcctGatherEnergy) error {
			m.Type = t
			m.NodeName, _ = u.Str()
			c, err := u.U16()
			if err != nil {
				return err
			}
			n, err := u.CheckCount("sensors", uint32(c), energySize)
			if err != nil || n == 0 {
				return err
			}
			m.Sensors = make([]Energy, n)
			for i := range m.Sensors {
				unpackEnergy(u, v, &m.Sensors[i])
			}
			return nil
		})
	register(energyCodec, ResponseAcctGatherUpdate, ResponseAcctGatherEnergy)

	RegisterBody(RequestAcctGatherEnergy, typedCodec(legacyAndSpoken,
		func(p *Packer, _ uint16, m *AcctGatherEnergyRequest) error {
			p.U16(m.ContextID)
			p.U16(m.Delta)
			return nil
		},
		func(u *Unpacker, _ uint16, _ MsgType, m *AcctGatherEnergyRequest) error {
			m.ContextID, _ = u.U16()
			m.Delta, _ = u.U16()
			return nil
		}))

	RegisterBody(RequestShutdown, typedCodec(legacyAndSpoken,
		func(p *Packer, _ uint16, m *ShutdownRequest) error { p.U16(m.Options); return nil },
		func(u *Unpacker, _ uint16, _ MsgType, m *ShutdownRequest) error { m.Options, _ = u.U16(); return nil }))

	// 26.05 adds power_action_name before reason.
	RegisterBody(RequestRebootNodes, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *RebootNodesRequest) error {
			p.Str(m.Features)
			p.U16(m.Flags)
			p.U32(m.NextState)
			p.Str(m.NodeList)
			if v >= Version2605 {
				p.Str(m.PowerActionName)
			}
			p.Str(m.Reason)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *RebootNodesRequest) error {
			m.Features, _ = u.Str()
			m.Flags, _ = u.U16()
			m.NextState, _ = u.U32()
			m.NodeList, _ = u.Str()
			if v >= Version2605 {
				m.PowerActionName, _ = u.Str()
			}
			m.Reason, _ = u.Str()
			return nil
		}))

	RegisterBody(MessageEpilogComplete, typedCodec(legacyAndSpoken,
		func(p *Packer, v uint16, m *EpilogComplete) error {
			if v >= Version2605 {
				p.StepID(v, jobAsStepID(m.JobID, m.StepID))
			} else {
				p.U32(m.JobID)
			}
			p.U32(m.RC)
			p.Str(m.NodeName)
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *EpilogComplete) error {
			if v >= Version2605 {
				m.StepID, _ = u.StepID(v)
				m.JobID = m.StepID.JobID
			} else {
				m.JobID, _ = u.U32()
			}
			m.RC, _ = u.U32()
			m.NodeName, _ = u.Str()
			return nil
		}))
}
