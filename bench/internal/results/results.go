// Package results is the schema of bench/results/<run>/results.json: every raw figure a bench
// run measured, plus the machine it ran on. The report generator reads only this file, so
// every table, plot and RFC fragment can be regenerated from it.
package results

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/tiee-hpc/tiee/bench/internal/flood"
	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/limitsrv"
	"github.com/tiee-hpc/tiee/bench/internal/procstat"
)

// SchemaVersion is bumped when a field changes meaning.
const SchemaVersion = 1

// Target kinds.
const (
	KindDaemon = "daemon" // a real node daemon registered with slurmctld
	KindLimit  = "limit"  // a limit server
)

// Target names, in the order tables list them.
const (
	TargetStock      = "stock"
	TargetGo         = "slurmd-go"
	TargetGoNet      = "slurmd-go-net"
	TargetLimitMunge = "limit-munge" // auth/munge runs
	TargetLimitSlurm = "limit-slurm" // auth/slurm runs: its equivalent
	TargetLimitNone  = "limit-noauth"
)

// Results is one bench run.
type Results struct {
	Schema      int     `json:"schema"`
	Profile     string  `json:"profile"` // "full" or "smoke"
	Started     string  `json:"started"`
	Finished    string  `json:"finished"`
	WallSeconds float64 `json:"wall_s"`
	// Stack is the Slurm release and auth type the run measured; runs made before the field
	// existed were all 22.05 with munge (see StackOf).
	Stack   Stack          `json:"stack"`
	Load    *MachineLoad   `json:"load,omitempty"` // nil in runs older than the field: see StartLoad
	Machine launch.Machine `json:"machine"`
	Config  Config         `json:"config"`
	Targets []Target       `json:"targets"`

	Munge  *MungeRates         `json:"munge,omitempty"`
	Tokens *TokenRates         `json:"tokens,omitempty"` // auth/slurm runs: token-rate
	Creds  CredStats           `json:"creds"`
	Idle   []Idle              `json:"idle,omitempty"`
	Closed []ClosedRun         `json:"closed,omitempty"`
	Holds  []HoldRun           `json:"holds,omitempty"`
	Open   []OpenRun           `json:"open,omitempty"`
	Jobs   []JobThroughput     `json:"jobs,omitempty"`  // job-throughput, one per daemon
	StepMg []StepRSS           `json:"stepd,omitempty"` // stepd-rss, one per daemon
	Srun   []SrunLaunch        `json:"srun,omitempty"`  // srun-launch, one per daemon
	MPI    []MPIStartup        `json:"mpi,omitempty"`   // mpi-startup, one per daemon with a multi-node partition
	Status []ScenarioStatus    `json:"scenarios"`
	Extra  map[string]any      `json:"extra,omitempty"` // later scenarios' figures, by scenario name
	Notes  []string            `json:"notes,omitempty"`
	Errors map[string][]string `json:"errors,omitempty"` // scenario -> failures that stopped it
}

// Stack says what a run measured: the release of slurmctld, the stock slurmd and the client
// commands, the header version every request had, and how RPCs were signed.
type Stack struct {
	Release  string `json:"release"`             // "22.05", "24.11"
	Auth     string `json:"auth"`                // "munge" (auth/munge, cred/munge) or "slurm" (auth/slurm, cred/slurm)
	Protocol string `json:"protocol"`            // "0x2A00"
	Stock    string `json:"stock_slurmd"`        // `slurmd -V` of the stock slurmd measured
	Chroot   string `json:"chroot,omitempty"`    // where the release's binaries ran ("": the host)
	KeyBytes int    `json:"key_bytes,omitempty"` // auth/slurm: size of the fresh slurm.key
}

// MachineLoad is how busy the machine was when the run started: the bench measures the machine
// whole, so a run that shared it with other work says so.
type MachineLoad struct {
	StartAvg1  float64 `json:"start_loadavg1"` // 1-minute load average when the measuring began
	QuietBelow float64 `json:"quiet_below"`    // the threshold the run waited for (-idle-load)
	WaitedS    float64 `json:"waited_s"`       // how long it waited for the machine to be quiet
	Quiet      bool    `json:"quiet"`          // StartAvg1 < QuietBelow
}

// DefaultQuietBelow is the quiet threshold of runs that did not record theirs.
const DefaultQuietBelow = 1.0

// StartLoad is r's Load, read from the machine's load average line for older runs.
func (r *Results) StartLoad() MachineLoad {
	if r.Load != nil {
		return *r.Load
	}
	var l float64
	if _, err := fmt.Sscanf(r.Machine.LoadAvgBefore, "%f", &l); err != nil {
		return MachineLoad{QuietBelow: DefaultQuietBelow, Quiet: true}
	}
	return MachineLoad{StartAvg1: l, QuietBelow: DefaultQuietBelow, Quiet: l < DefaultQuietBelow}
}

// StackOf is r's stack, with the 22.05/munge of runs older than the field.
func (r *Results) StackOf() launch.Stack {
	if r.Stack.Release == "" {
		return launch.DefaultStack
	}
	return launch.Stack{Release: r.Stack.Release, Auth: r.Stack.Auth}
}

// AuthLimit is the name of the authentication-bound limit server of r's auth type.
func (r *Results) AuthLimit() string {
	if r.StackOf().Auth == launch.AuthSlurm {
		return TargetLimitSlurm
	}
	return TargetLimitMunge
}

// Config is what the run was asked to do.
type Config struct {
	VUs              []int   `json:"vus"`
	StatusVUs        []int   `json:"status_vus"`
	WarmupS          float64 `json:"warmup_s"`
	DurationS        float64 `json:"duration_s"`
	Holds            []int   `json:"holds"`
	HoldProbeS       float64 `json:"hold_probe_s"`
	HoldProbeRate    float64 `json:"hold_probe_rate"`
	OpenHeld         int     `json:"open_held"`
	OpenDurationS    float64 `json:"open_duration_s"`
	OpenRateFraction float64 `json:"open_rate_fraction"` // of stock's best closed-loop ping rate
	RPCTimeoutS      float64 `json:"rpc_timeout_s"`
	MessageTimeoutS  float64 `json:"message_timeout_s"`
	SlurmdDebug      string  `json:"slurmd_debug"`
	MungedThreads    int     `json:"munged_threads"` // 0: munged's default (2)
	SourceAddrs      int     `json:"source_addrs"`
	SampleIntervalMS float64 `json:"sample_interval_ms"`
	// JobsPerCore: jobs that may share a core in the per-daemon partitions (OverSubscribe=FORCE).
	JobsPerCore int `json:"jobs_per_core,omitempty"`
	// Only: the scenarios the run was limited to (benchrun -only); empty: every scenario.
	// A partial run renders only its own scenarios' RFC blocks.
	Only []string `json:"only,omitempty"`
	// NodesPerDaemon: nodes of the stock slurmd's and slurmd-go's multi-node partitions
	// (mpi-startup's steps); 0 in runs that had none.
	NodesPerDaemon int `json:"nodes_per_daemon,omitempty"`
}

// Target is one server under test.
type Target struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Desc string `json:"desc"`
	Addr string `json:"addr"`
	PID  int    `json:"pid"`
}

// RatePoint is one munged throughput measurement at a given concurrency.
type RatePoint struct {
	Concurrency int     `json:"concurrency"`
	Ops         int     `json:"ops"`
	Seconds     float64 `json:"seconds"`
	Rate        float64 `json:"rate"` // ops/s
	MeanMs      float64 `json:"mean_ms"`
	Errors      int     `json:"errors"`
	// CPU per operation, µs: in munged, and in the calling process (the munge client).
	MungedCPUUS float64 `json:"munged_cpu_us"`
	CallerCPUUS float64 `json:"caller_cpu_us"`
}

// MungeRates is munged's own encode and decode throughput, measured with the munge client from the
// bench process against the private munged.
type MungeRates struct {
	Threads   int         `json:"munged_threads"`
	Encode    []RatePoint `json:"encode"`
	Decode    []RatePoint `json:"decode"`
	MungedCPU float64     `json:"munged_cpu_s"`
}

// Best returns the highest rate of points.
func Best(points []RatePoint) RatePoint {
	var b RatePoint
	for _, p := range points {
		if p.Rate > b.Rate {
			b = p
		}
	}
	return b
}

// Serial returns the concurrency-1 point (zero if absent).
func Serial(points []RatePoint) RatePoint {
	for _, p := range points {
		if p.Concurrency == 1 {
			return p
		}
	}
	return RatePoint{}
}

// CredCeiling is the RPC rate munged allows a daemon that decodes one credential and encodes
// one per RPC: 1 / (1/decode + 1/encode) at the best concurrencies.
func (m *MungeRates) CredCeiling() float64 {
	if m == nil {
		return 0
	}
	d, e := Best(m.Decode).Rate, Best(m.Encode).Rate
	if d <= 0 || e <= 0 {
		return 0
	}
	return 1 / (1/d + 1/e)
}

// TokenRates is the rate at which the bench's own auth/slurm code (slurmd-go's authslurm, the
// HS256 tokens of the cluster's key) makes and verifies RPC tokens in the bench process, at
// several concurrencies: auth/slurm's counterpart of MungeRates, with no service behind it.
type TokenRates struct {
	Encode []RatePoint `json:"encode"` // authslurm.Auth.Encode: a token carrying the message hash
	Decode []RatePoint `json:"decode"` // authslurm.Auth.Decode: signature, expiry, ruid, context
	// TokenBytes is the length of one REQUEST_PING token.
	TokenBytes int `json:"token_bytes"`
}

// CredCeiling is the RPC rate the token work allows a daemon that verifies one token per RPC
// (24.11 signs no reply), at the best concurrency, with nothing else on the cores.
func (t *TokenRates) CredCeiling() float64 {
	if t == nil {
		return 0
	}
	return Best(t.Decode).Rate
}

// CredStats is the cost of making the client's credentials: munge credentials before every
// timed phase; auth/slurm tokens as each request is sent (Minted), inside it.
type CredStats struct {
	Made    int64   `json:"made"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	Left    int     `json:"left_unused"`
	// Minted is the auth/slurm tokens the client made while sending (none pre-made).
	Minted int64 `json:"minted,omitempty"`
}

// Idle is a daemon's footprint with no load.
type Idle struct {
	Target string          `json:"target"`
	When   string          `json:"when"` // "start" (after registration) or "after-load"
	Series procstat.Series `json:"series"`
	// Mem is what the RSS is made of, read once at the end of the window.
	Mem *procstat.Mem `json:"mem,omitempty"`
}

// CPU is CPU time used during a run, in seconds: closed loops over the measured window,
// open loops over the whole run. Busy is every CPU's busy time on the machine, IRQ the part
// spent in interrupts and softirqs (loopback TCP processing that no process is charged for),
// Total the busy+idle time (cores × wall time). Busy − IRQ − Daemon − Munged − Client is what
// every other process (slurmctld, other users of the machine) took meanwhile.
type CPU struct {
	Daemon float64 `json:"daemon_s"`
	Munged float64 `json:"munged_s"`
	Client float64 `json:"client_s"`
	Busy   float64 `json:"machine_busy_s"`
	IRQ    float64 `json:"machine_irq_s"`
	Total  float64 `json:"machine_total_s"`
}

// Others is the CPU time of every other process.
func (c CPU) Others() float64 { return max(0, c.Busy-c.IRQ-c.Daemon-c.Munged-c.Client) }

// Kernel is what the kernel saw during a run (deltas of /proc/net/netstat TcpExt counters).
type Kernel struct {
	ListenOverflows int64 `json:"listen_overflows"`
	ListenDrops     int64 `json:"listen_drops"`
	TimeWaitAfter   int64 `json:"timewait_after"`
}

// ClosedRun is one closed-loop run.
type ClosedRun struct {
	Target string          `json:"target"`
	Msg    string          `json:"msg"`
	VUs    int             `json:"vus"`
	Stats  flood.Stats     `json:"stats"`
	Daemon procstat.Series `json:"daemon"`
	CPU    CPU             `json:"cpu"`
	Kernel Kernel          `json:"kernel"`
	Limit  *limitsrv.Stats `json:"limit,omitempty"` // limit servers: counter deltas
}

// HoldRun is one hold: Conns idle connections kept open while pings probe latency.
type HoldRun struct {
	Target   string          `json:"target"`
	Conns    int             `json:"conns"`
	Hold     flood.HoldStats `json:"hold"`
	Baseline procstat.Series `json:"baseline"` // before the ramp
	During   procstat.Series `json:"during"`   // while the probes ran
	// PerConnKB is (median RSS during − median RSS before) / connections held; PerFDKB divides
	// by the daemon's extra descriptors instead (what it accepted).
	PerConnKB float64     `json:"per_conn_kb"`
	PerFDKB   float64     `json:"per_fd_kb"`
	Probe     flood.Stats `json:"probe"`
	Kernel    Kernel      `json:"kernel"`
}

// OpenRun is one open-loop run with Held idle connections held.
type OpenRun struct {
	Target string          `json:"target"`
	Rate   float64         `json:"rate"`
	Held   int             `json:"held"`
	Hold   flood.HoldStats `json:"hold"`
	Stats  flood.Stats     `json:"stats"`
	Daemon procstat.Series `json:"daemon"`
	CPU    CPU             `json:"cpu"`
	Kernel Kernel          `json:"kernel"`
}

// JobThroughput is one job array of `true` through slurmctld to one daemon (its own
// partition): from sbatch until no task of the array is left pending, running or completing.
type JobThroughput struct {
	Target    string         `json:"target"`
	Partition string         `json:"partition"`
	JobID     string         `json:"job_id"`
	Tasks     int            `json:"tasks"`
	Seconds   float64        `json:"seconds"`
	Rate      float64        `json:"jobs_per_s"`
	Completed int            `json:"completed"` // tasks that ended COMPLETED (scontrol show job)
	States    map[string]int `json:"states"`    // final state -> tasks
}

// StepRSS is the resident memory of the step manager of one running batch job (`sleep`),
// sampled while it is idle.
type StepRSS struct {
	Target      string  `json:"target"`
	Partition   string  `json:"partition"`
	JobID       string  `json:"job_id"`
	PID         int     `json:"pid"`
	Cmdline     string  `json:"cmdline"`
	SamplesKB   []int64 `json:"rss_kb_samples"`
	RSSMedianKB int64   `json:"rss_median_kb"`
	Threads     int     `json:"threads"`
	// Mem is what the RSS is made of, read after the samples.
	Mem *procstat.Mem `json:"mem,omitempty"`
}

// SrunLaunch is Runs sequential `srun -n1 -N1 -w <node> true` to one daemon, each timed as
// the wall time of the srun command (start to exit, as root, on this machine). Statistics are
// over the runs that succeeded (exit 0 within TimeoutS); a failed run is counted in Errors and
// its time kept in FailedMs. The warm-up run before them is not in any statistic.
type SrunLaunch struct {
	Target    string    `json:"target"`
	Node      string    `json:"node"`
	Partition string    `json:"partition"`
	Command   string    `json:"command"`
	Runs      int       `json:"runs"`       // timed runs asked for
	TimeoutS  float64   `json:"timeout_s"`  // each run's limit
	WarmupMs  float64   `json:"warmup_ms"`  // the untimed first run (0: none)
	Ms        []float64 `json:"latency_ms"` // every successful run, in run order
	FailedMs  []float64 `json:"failed_ms,omitempty"`
	OK        int       `json:"ok"`
	Errors    int       `json:"errors"`
	ErrorText []string  `json:"error_samples,omitempty"` // the first few failures
	P50Ms     float64   `json:"p50_ms"`                  // nearest rank
	P99Ms     float64   `json:"p99_ms"`                  // nearest rank (the largest below 100 runs)
	MinMs     float64   `json:"min_ms"`
	MaxMs     float64   `json:"max_ms"`
	MeanMs    float64   `json:"mean_ms"`
	Seconds   float64   `json:"seconds"` // all timed runs together
}

// MPIStartup is Runs sequential MPI jobs of Ranks ranks on the Nodes of one daemon's multi-node
// partition: `srun -N<nodes> -n<ranks> -O --mpi=pmi2 hello` as root, hello being
// slurmd-go/integration/testdata/mpi/hello.c built with the stack's mpicc.mpich. Each run
// has two times from srun's start: Startup, until srun relays rank 0's line written after
// MPI_Init, an allreduce and a barrier of every rank (so every rank has passed MPI_Init), and
// Wall, until srun exits (MPI_Finalize, the step's and the job's end included). A run counts
// only if srun exits 0 and the output is one MPI job of Ranks ranks on all the nodes (every
// rank's hello with the right size, the allreduce checked, one rank 0): ranks that come up as
// singletons fail it. Statistics are over the runs that counted; the warm-up run before them
// is in none.
type MPIStartup struct {
	Target    string    `json:"target"`
	Partition string    `json:"partition"`
	Nodes     []string  `json:"nodes"`
	Ranks     int       `json:"ranks"`
	Command   string    `json:"command"`
	Runs      int       `json:"runs"`      // timed runs asked for
	TimeoutS  float64   `json:"timeout_s"` // each run's limit
	Warmup    bool      `json:"warmup"`    // one untimed run came first
	WarmupMs  float64   `json:"warmup_ms,omitempty"`
	StartupMs []float64 `json:"startup_ms"` // every run that counted, in run order
	WallMs    []float64 `json:"wall_ms"`    // the same runs' srun wall times
	BarrierMs []float64 `json:"barrier_ms"` // the same runs' barrier as rank 0's MPI_Wtime timed it
	FailedMs  []float64 `json:"failed_ms,omitempty"`
	OK        int       `json:"ok"`
	Errors    int       `json:"errors"`
	ErrorText []string  `json:"error_samples,omitempty"` // the first few failures
	Startup   MsStats   `json:"startup"`
	Wall      MsStats   `json:"wall"`
	Seconds   float64   `json:"seconds"` // all timed runs together
}

// MsStats summarises a few timings (ms): the median by nearest rank, the extremes, the mean.
type MsStats struct {
	P50  float64 `json:"p50_ms"`
	Min  float64 `json:"min_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// Summarize is xs's MsStats (zero for none); xs keeps its order.
func Summarize(xs []float64) MsStats {
	if len(xs) == 0 {
		return MsStats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return MsStats{P50: NearestRank(s, 50), Min: s[0], Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// NearestRank is the p-th percentile of sorted (ascending, not empty) by the nearest-rank
// method: the smallest value with at least p % of the values at or below it.
func NearestRank(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted))/100)) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// MPIFor is target's mpi-startup measurement (nil if absent).
func (r *Results) MPIFor(target string) *MPIStartup {
	for i := range r.MPI {
		if r.MPI[i].Target == target {
			return &r.MPI[i]
		}
	}
	return nil
}

// Ran reports whether the run has a status for scenario name (it ran, failed, or said why it
// could not).
func (r *Results) Ran(name string) bool {
	for _, s := range r.Status {
		if s.Name == name {
			return true
		}
	}
	return false
}

// SrunFor is target's srun-launch measurement (nil if absent).
func (r *Results) SrunFor(target string) *SrunLaunch {
	for i := range r.Srun {
		if r.Srun[i].Target == target {
			return &r.Srun[i]
		}
	}
	return nil
}

// JobsFor is target's job-throughput run (nil if absent).
func (r *Results) JobsFor(target string) *JobThroughput {
	for i := range r.Jobs {
		if r.Jobs[i].Target == target {
			return &r.Jobs[i]
		}
	}
	return nil
}

// StepRSSFor is target's stepd-rss measurement (nil if absent).
func (r *Results) StepRSSFor(target string) *StepRSS {
	for i := range r.StepMg {
		if r.StepMg[i].Target == target {
			return &r.StepMg[i]
		}
	}
	return nil
}

// Scenario statuses.
const (
	StatusMeasured    = "measured"
	StatusNotMeasured = "not measured yet"
	StatusFailed      = "failed"
	// StatusNotApplicable: what the scenario measures does not exist in the run's stack
	// (munged under auth/slurm); its note says why.
	StatusNotApplicable = "not applicable"
)

// ScenarioStatus says what became of each registered scenario.
type ScenarioStatus struct {
	Name    string  `json:"name"`
	Title   string  `json:"title"`
	Status  string  `json:"status"`
	Note    string  `json:"note,omitempty"`
	Seconds float64 `json:"seconds"`
	// LoadAvg1 is the machine's 1-minute load average when the scenario started (the bench's
	// own earlier work included).
	LoadAvg1 float64 `json:"loadavg1_at_start,omitempty"`
}

// Load reads a results.json.
func Load(path string) (*Results, error) {
	var r Results
	if err := loadJSON(path, &r, func() (int, int) { return r.Schema, SchemaVersion }); err != nil {
		return nil, err
	}
	return &r, nil
}

// loadJSON reads path into v and checks its schema (have, want) once decoded.
func loadJSON(path string, v any, schema func() (have, want int)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("results: %s: %w", path, err)
	}
	if have, want := schema(); have != want {
		return fmt.Errorf("results: %s: schema %d, want %d", path, have, want)
	}
	return nil
}

// Save writes r to path (indented, atomically).
func (r *Results) Save(path string) error { return saveJSON(path, r) }

// saveJSON writes v to path as indented JSON, through a rename.
func saveJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ClosedFor returns the closed-loop run of target, msg and vus (nil if none).
func (r *Results) ClosedFor(target, msg string, vus int) *ClosedRun {
	for i := range r.Closed {
		c := &r.Closed[i]
		if c.Target == target && c.Msg == msg && c.VUs == vus {
			return c
		}
	}
	return nil
}

// HoldFor returns the hold of target with conns connections (nil if none).
func (r *Results) HoldFor(target string, conns int) *HoldRun {
	for i := range r.Holds {
		h := &r.Holds[i]
		if h.Target == target && h.Conns == conns {
			return h
		}
	}
	return nil
}

// OpenFor returns the open-loop run of target (nil if none).
func (r *Results) OpenFor(target string) *OpenRun {
	for i := range r.Open {
		if r.Open[i].Target == target {
			return &r.Open[i]
		}
	}
	return nil
}

// IdleFor returns the idle footprint of target at when (nil if none).
func (r *Results) IdleFor(target, when string) *Idle {
	for i := range r.Idle {
		if r.Idle[i].Target == target && r.Idle[i].When == when {
			return &r.Idle[i]
		}
	}
	return nil
}

// BestClosed returns the highest-throughput closed-loop run of target for msg.
func (r *Results) BestClosed(target, msg string) *ClosedRun {
	var b *ClosedRun
	for i := range r.Closed {
		c := &r.Closed[i]
		if c.Target == target && c.Msg == msg && (b == nil || c.Stats.Throughput > b.Stats.Throughput) {
			b = c
		}
	}
	return b
}

// TargetNames lists the targets in order.
func (r *Results) TargetNames() []string {
	var n []string
	for _, t := range r.Targets {
		n = append(n, t.Name)
	}
	return n
}
