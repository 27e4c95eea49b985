package slurmproto

// Node state bits of update_node_msg_t.node_state (slurm.h), the same in
// 22.05, 24.11 and 26.05.
const (
	NodeStateUndrain uint32 = 1 << 6 // NODE_STATE_UNDRAIN: clear DRAIN only
	NodeResume       uint32 = 1 << 8 // NODE_RESUME
	NodeStateDrain   uint32 = 1 << 9 // NODE_STATE_DRAIN
)

// UpdateNode is REQUEST_UPDATE_NODE (update_node_msg_t), what `scontrol
// update NodeName=...` sends slurmctld: the node daemon drains its own node
// when a GPU fails and resumes it when the fault it reported is gone.
// Fields a release does not carry are dropped on the wire: ReasonUID exists
// in 22.05 only (24.11 takes the sender's auth uid), CertToken and
// InstanceID/InstanceType from 24.11, PowerActionName and TopologyStr in
// 26.05.
type UpdateNode struct {
	CertToken       string
	Comment         string
	CPUBind         uint32
	Extra           string
	Features        string
	FeaturesAct     string
	Gres            string
	InstanceID      string
	InstanceType    string
	NodeAddr        string
	NodeHostname    string
	NodeNames       string
	NodeState       uint32
	PowerActionName string
	Reason          string
	ReasonUID       uint32
	ResumeAfter     uint32
	TopologyStr     string
	Weight          uint32
}

// NewUpdateNode is slurm_init_update_node_msg for names: every setting
// left unchanged (node_state, resume_after and weight NO_VAL).
func NewUpdateNode(names string) UpdateNode {
	return UpdateNode{NodeNames: names, NodeState: NoVal, ResumeAfter: NoVal, Weight: NoVal}
}

// MsgType implements Body.
func (UpdateNode) MsgType() MsgType { return RequestUpdateNode }

func init() {
	RegisterBody(RequestUpdateNode, typedCodec(spoken, packUpdateNode, unpackUpdateNode))
}

func packUpdateNode(p *Packer, v uint16, m *UpdateNode) error {
	if v >= Version2411 {
		p.Str(m.CertToken)
	}
	p.Str(m.Comment)
	p.U32(m.CPUBind)
	p.Str(m.Extra)
	p.Str(m.Features)
	p.Str(m.FeaturesAct)
	p.Str(m.Gres)
	if v >= Version2411 {
		p.Str(m.InstanceID)
		p.Str(m.InstanceType)
	}
	p.Str(m.NodeAddr)
	p.Str(m.NodeHostname)
	p.Str(m.NodeNames)
	p.U32(m.NodeState)
	if v >= Version2605 {
		p.Str(m.PowerActionName)
	}
	p.Str(m.Reason)
	if v >= Version2411 {
		p.U32(m.ResumeAfter)
	} else {
		p.U32(m.ReasonUID)
	}
	if v >= Version2605 {
		p.Str(m.TopologyStr)
	}
	p.U32(m.Weight)
	return nil
}

func unpackUpdateNode(u *Unpacker, v uint16, _ MsgType, m *UpdateNode) error {
	if v >= Version2411 {
		m.CertToken, _ = u.Str()
	}
	m.Comment, _ = u.Str()
	m.CPUBind, _ = u.U32()
	m.Extra, _ = u.Str()
	m.Features, _ = u.Str()
	m.FeaturesAct, _ = u.Str()
	m.Gres, _ = u.Str()
	if v >= Version2411 {
		m.InstanceID, _ = u.Str()
		m.InstanceType, _ = u.Str()
	}
	m.NodeAddr, _ = u.Str()
	m.NodeHostname, _ = u.Str()
	m.NodeNames, _ = u.Str()
	m.NodeState, _ = u.U32()
	if v >= Version2605 {
		m.PowerActionName, _ = u.Str()
	}
	m.Reason, _ = u.Str()
	if v >= Version2411 {
		m.ResumeAfter, _ = u.U32()
	} else {
		m.ReasonUID, _ = u.U32()
	}
	if v >= Version2605 {
		m.TopologyStr, _ = u.Str()
	}
	m.Weight, _ = u.U32()
	return nil
}
