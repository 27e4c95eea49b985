package slurmproto

// ForwardData is REQUEST_FORWARD_DATA (forward_data_msg_t): the mpi/pmi2
// and mpi/pmix step managers and srun hand Data to a unix socket on a node
// through its slurmd. Address may hold %n/%h, which the receiving slurmd
// expands with its node name. Len is sent apart from Data's own length
// (pack32 then packmem), and slurmd writes Len bytes; the two can disagree
// on the wire, so the handler checks them. The layout is the same in 22.05,
// 24.11 and 26.05.
type ForwardData struct {
	Address string
	Len     uint32
	Data    []byte
}

// MsgType implements Body.
func (ForwardData) MsgType() MsgType { return RequestForwardData }

func init() {
	RegisterBody(RequestForwardData, typedCodec(spoken,
		func(p *Packer, _ uint16, m *ForwardData) error {
			p.Str(m.Address)
			p.U32(m.Len)
			p.Mem(m.Data)
			return nil
		},
		func(u *Unpacker, _ uint16, _ MsgType, m *ForwardData) error {
			m.Address, _ = u.Str()
			m.Len, _ = u.U32()
			m.Data, _ = u.Mem()
			return nil
		}))
}

// JobStepKill is REQUEST_CANCEL_JOB_STEP (job_step_kill_msg_t), what
// slurm_kill_job_step sends slurmctld: the mpi/pmi2 step manager cancels its
// step with SIGKILL when a KVS fence cannot complete. The same layout in
// 22.05, 24.11 and 26.05 (the step id is the release's).
type JobStepKill KillJobRequest

// MsgType implements Body.
func (JobStepKill) MsgType() MsgType { return RequestCancelJobStep }

func init() {
	RegisterBody(RequestCancelJobStep, typedCodec(spoken,
		func(p *Packer, v uint16, m *JobStepKill) error { return packJobStepKill(p, v, (*KillJobRequest)(m)) },
		func(u *Unpacker, v uint16, t MsgType, m *JobStepKill) error {
			return unpackJobStepKill(u, v, t, (*KillJobRequest)(m))
		}))
}
