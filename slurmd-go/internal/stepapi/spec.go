package stepapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
)

// SpecVersion is the version of StartSpec this package writes and the only
// one it reads. Bump it when a field changes meaning; adding an optional
// field does not need a bump (unknown JSON fields are rejected, so an old
// step manager refuses a newer daemon's spec instead of misreading it).
const SpecVersion = 1

// MaxSpecSize bounds a StartSpec on the wire (the launch body carries the
// batch script, which slurmctld caps at 4 MiB by default).
const MaxSpecSize = 256 << 20

// Kind selects what a step manager runs.
type Kind string

// Step manager kinds.
const (
	KindBatch Kind = "batch" // REQUEST_BATCH_JOB_LAUNCH
	KindTasks Kind = "tasks" // REQUEST_LAUNCH_TASKS
	// KindExtern is the job's extern step (PrologFlags=Contain), started
	// from REQUEST_LAUNCH_PROLOG.
	KindExtern Kind = "extern"
)

// StartSpec is everything a step manager needs, computed by the daemon from
// slurm.conf and the launch RPC. It travels as JSON (durations in
// nanoseconds, LaunchBody in base64).
type StartSpec struct {
	SpecVersion int  `json:"spec_version"`
	Kind        Kind `json:"kind"`

	NodeName    string `json:"node_name"`    // this node's NodeName
	Hostname    string `json:"hostname"`     // short host name (conf->hostname; %N in file names)
	ClusterName string `json:"cluster_name"` // SLURM_CLUSTER_NAME
	ConfFile    string `json:"conf_file"`    // SLURM_CONF value; "" makes it "(null)" as in stock
	SpoolDir    string `json:"spool_dir"`    // SlurmdSpoolDir, expanded
	NodeIndex   int    `json:"node_index"`   // this node's index in the job's node list

	CtldHosts      []string      `json:"ctld_hosts"` // host:port, primary first
	MessageTimeout time.Duration `json:"message_timeout"`
	// AuthType is slurm.conf's (auth/munge when empty); auth/slurm's keys
	// are read beside ConfFile.
	AuthType string `json:"auth_type,omitempty"`
	// Munge and CommunicationParameters, as the daemon uses them.
	MungeSocket      string `json:"munge_socket"`
	MungeTTL         int    `json:"munge_ttl"`
	MungeAllowReplay bool   `json:"munge_allow_replay"`
	BlockNullHash    bool   `json:"block_null_hash"`
	BlockZeroHash    bool   `json:"block_zero_hash"`

	SlurmUserUID uint32        `json:"slurm_user_uid"` // SlurmUser: may signal any step
	KillWait     time.Duration `json:"kill_wait"`
	// JobFileAppend decides open mode 0 (append instead of truncate).
	JobFileAppend bool `json:"job_file_append"`
	// PropagateResourceLimits / ...Except as in slurm.conf ("" = ALL).
	PropagateResourceLimits       string `json:"propagate_resource_limits"`
	PropagateResourceLimitsExcept string `json:"propagate_resource_limits_except"`
	PropagatePrioProcess          uint16 `json:"propagate_prio_process"` // 0, 1 or 2
	VSizeFactor                   uint16 `json:"vsize_factor"`           // percent; 0 = no RLIMIT_AS
	TaskProlog                    string `json:"task_prolog"`
	// TaskPlugin and UnkillableStepTimeout as slurm.conf has them; the
	// step manager names them in its --slurmd-debug lines.
	TaskPlugin            string        `json:"task_plugin,omitempty"`
	UnkillableStepTimeout time.Duration `json:"unkillable_step_timeout,omitempty"`
	TaskEpilog            string        `json:"task_epilog"`
	TmpFS                 string        `json:"tmp_fs"`
	// PlugStack is plugstack.conf's path and PluginDir slurm.conf's: a step
	// hosts the SPANK plugins named there (spank/runner).
	PlugStack string `json:"plugstack,omitempty"`
	PluginDir string `json:"plugin_dir,omitempty"`
	// PackNodes is SelectTypeParameters CR_Pack_Nodes (task layout).
	PackNodes bool `json:"pack_nodes"`

	LogFile  string `json:"log_file"`  // the daemon's log file; "" = no log
	LogLevel int    `json:"log_level"` // Slurm level number (info 3, debug 5, ...)
	// SyslogLevel is slurmstepd's syslog level as slurmd hands it down
	// (SlurmdSyslogDebug; quiet in the foreground; else the log level
	// without a log file, fatal with one); only reported, never used.
	SyslogLevel int `json:"syslog_level,omitempty"`

	// WorkingCluster is SLURM_WORKING_CLUSTER:
	// cluster:ctldaddr:port:9728:<select plugin id>.
	WorkingCluster  string `json:"working_cluster"`
	TopologyAddr    string `json:"topology_addr"`    // SLURM_TOPOLOGY_ADDR
	TopologyPattern string `json:"topology_pattern"` // SLURM_TOPOLOGY_ADDR_PATTERN

	// CgroupRoot is the directory under which job cgroups are made,
	// relative to each hierarchy's mount point ("" = "tiee/<NodeName>").
	CgroupRoot string `json:"cgroup_root"`
	// NoCgroup disables cgroups (tracking falls back to session and
	// process group).
	NoCgroup bool `json:"no_cgroup"`
	// ProctrackCgroup is ProctrackType=proctrack/cgroup: suspend then
	// freezes the step's cgroup for SIGSTOP, and SIGTSTP and SIGCONT go to
	// the step's own tasks only, as that plugin's signal does.
	ProctrackCgroup bool `json:"proctrack_cgroup,omitempty"`
	// IgnoreMemoryLimit does not enforce the credential's memory limit.
	IgnoreMemoryLimit bool `json:"ignore_memory_limit"`

	// GresTypes is slurm.conf's GresTypes, the GRES plugins stock loads.
	GresTypes []string `json:"gres_types,omitempty"`
	// GresRecords are the node's GRES records (gres.conf and autodetected)
	// that the step binds its credential's GRES to (device files, env flags).
	GresRecords []gres.Record `json:"gres_records,omitempty"`
	// ConstrainDevices is TaskPlugin task/cgroup with cgroup.conf
	// ConstrainDevices=yes: GRES devices are confined per job, step and
	// task, and the device variables count a task's devices from 0.
	ConstrainDevices bool `json:"constrain_devices,omitempty"`

	// ProtocolVersion is the header version of the launch RPC.
	ProtocolVersion uint16 `json:"protocol_version"`
	// TRESIDs are the ids of the TRES slurmctld told the node at
	// registration (assoc_mgr's tres list), in its order: from 24.11 a
	// step's completion carries an accounting record over them.
	TRESIDs []uint32 `json:"tres_ids,omitempty"`
	// UserEnv is the batch job's user's login environment, loaded by the
	// daemon for SLURM_GET_USER_ENV=1 (sbatch --get-user-env,
	// --export=NONE); the launch's environment is merged over it. Absent
	// otherwise, or when it could not be loaded.
	UserEnv []string `json:"user_env,omitempty"`
	// LaunchBody is the REQUEST_BATCH_JOB_LAUNCH body exactly as received
	// (user_name and gids are taken from its credential), or the
	// REQUEST_LAUNCH_TASKS body as slurmd-go completed it from the verified
	// credential (user name, gids, node CPUs, memory, orig_addr), or the
	// REQUEST_LAUNCH_PROLOG body for the extern step.
	LaunchBody []byte `json:"launch_body"`
}

// ErrBadSpec is wrapped by Validate and ReadSpec failures.
var ErrBadSpec = errors.New("stepapi: bad start spec")

// Validate checks the fields a step manager cannot do without.
func (s *StartSpec) Validate() error {
	switch {
	case s.SpecVersion != SpecVersion:
		return fmt.Errorf("%w: spec version %d, want %d", ErrBadSpec, s.SpecVersion, SpecVersion)
	case s.Kind != KindBatch && s.Kind != KindTasks && s.Kind != KindExtern:
		return fmt.Errorf("%w: kind %q not supported", ErrBadSpec, s.Kind)
	case s.NodeName == "":
		return fmt.Errorf("%w: no node name", ErrBadSpec)
	case !filepath.IsAbs(s.SpoolDir):
		return fmt.Errorf("%w: spool dir %q is not absolute", ErrBadSpec, s.SpoolDir)
	case len(s.CtldHosts) == 0:
		return fmt.Errorf("%w: no slurmctld hosts", ErrBadSpec)
	case len(s.LaunchBody) == 0:
		return fmt.Errorf("%w: no launch body", ErrBadSpec)
	}
	return nil
}

// WriteSpec writes s as a 4-byte big-endian length and its JSON.
func WriteSpec(w io.Writer, s *StartSpec) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("stepapi: encode spec: %w", err)
	}
	return writeFrame(w, b)
}

// ReadSpec reads what WriteSpec wrote and validates it.
func ReadSpec(r io.Reader) (*StartSpec, error) {
	b, err := readFrame(r, MaxSpecSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	var s StartSpec
	if err := decodeStrict(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func writeFrame(w io.Writer, b []byte) error {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(out, b...))
	return err
}

func readFrame(r io.Reader, max int) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("frame of %d bytes exceeds %d", n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
