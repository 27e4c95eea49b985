package slurmproto

// Configless: a node started with --conf-server asks slurmctld for its
// configuration files (REQUEST_CONFIG), and slurmctld pushes them again on
// every reconfigure (REQUEST_RECONFIGURE_WITH_CONFIG, the same body as
// RESPONSE_CONFIG).

// Config request flags (config_request_flags).
const (
	ConfigRequestSlurmConf uint32 = 0 // a client's slurm.conf only
	ConfigRequestSlurmd    uint32 = 1 // every file a node daemon reads
)

// ConfigRequest is REQUEST_CONFIG (config_request_msg_t): u32 flags; 25.05
// adds u16 port, the asking daemon's listening port.
type ConfigRequest struct {
	Flags uint32
	Port  uint16 // sent from 25.05 on
}

// MsgType implements Body.
func (ConfigRequest) MsgType() MsgType { return RequestConfig }

// ConfigFile is one config_file_t: a file of slurmctld's configuration
// directory by name, or, Exists false, one the node must remove.
type ConfigFile struct {
	Exists  bool
	Execute bool // 23.11+: a script (mode 0755)
	Name    string
	Content string
}

// ConfigResponse is config_response_msg_t: slurm_pack_list of
// config_file_t (a nil Files packs as a NULL list), then the node's
// SlurmdSpoolDir (unexpanded: %n and %h are the node's to fill).
type ConfigResponse struct {
	// Type is ResponseConfig (zero) or RequestReconfigureWithConfig.
	Type     MsgType
	Files    []ConfigFile
	SpoolDir string
}

// MsgType implements Body.
func (m ConfigResponse) MsgType() MsgType {
	if m.Type == 0 {
		return ResponseConfig
	}
	return m.Type
}

// configFileMinSize is an absent file's bytes: bool, two NULL strings.
const configFileMinSize = 1 + 4 + 4

func init() {
	RegisterBody(RequestConfig, typedCodec(spoken,
		func(p *Packer, v uint16, m *ConfigRequest) error {
			p.U32(m.Flags)
			if v >= Version2605 {
				p.U16(m.Port)
			}
			return nil
		},
		func(u *Unpacker, v uint16, _ MsgType, m *ConfigRequest) error {
			m.Flags, _ = u.U32()
			if v >= Version2605 {
				m.Port, _ = u.U16()
			}
			return nil
		}))
	resp := typedCodec(spoken,
		func(p *Packer, v uint16, m *ConfigResponse) error {
			p.ListLen(m.Files == nil, len(m.Files))
			for _, f := range m.Files {
				p.Bool(f.Exists)
				if v >= Version2411 {
					p.Bool(f.Execute)
				}
				p.Str(f.Name)
				p.Str(f.Content)
			}
			p.Str(m.SpoolDir)
			return nil
		},
		func(u *Unpacker, v uint16, t MsgType, m *ConfigResponse) error {
			if t != ResponseConfig {
				m.Type = t
			}
			n, isNil, err := u.ListLen(configFileMinSize)
			if err != nil {
				return err
			}
			if !isNil {
				m.Files = make([]ConfigFile, n)
			}
			for i := range m.Files {
				f := &m.Files[i]
				f.Exists, _ = u.Bool()
				if v >= Version2411 {
					f.Execute, _ = u.Bool()
				}
				f.Name, _ = u.Str()
				f.Content, _ = u.Str()
			}
			m.SpoolDir, _ = u.Str()
			return nil
		})
	RegisterBody(ResponseConfig, resp)
	RegisterBody(RequestReconfigureWithConfig, resp)
}
