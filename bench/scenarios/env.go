package scenarios

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/flood"
	"github.com/tiee-hpc/tiee/bench/internal/launch"
	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/bench/internal/results"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Profile sizes a run.
type Profile struct {
	Name             string
	VUs              []int // closed-loop REQUEST_PING levels
	StatusVUs        []int // closed-loop REQUEST_DAEMON_STATUS levels (daemons only)
	Warmup           time.Duration
	Duration         time.Duration
	Holds            []int
	HoldRamp         time.Duration // longest wait for a hold to be fully open
	HoldProbe        time.Duration
	HoldProbeRate    float64
	OpenHeld         int
	OpenDuration     time.Duration
	OpenRateFraction float64
	RPCTimeout       time.Duration
	IdleSample       time.Duration
	Settle           time.Duration // pause between runs
	MungeOps         int           // per concurrency level
	MungeConcurrency []int         // munge-rate and token-rate
	TokenOps         int           // token-rate: per concurrency level (tokens take microseconds)
	JobArray         int           // job-throughput: tasks in the array of `true`
	JobArrayTimeout  time.Duration // job-throughput: longest wait for one array to finish
	StepSleep        time.Duration // stepd-rss: the job's `sleep`
	StepSamples      int           // stepd-rss: VmRSS readings of the idle step manager
	SrunRuns         int           // srun-launch: timed `srun -n1 true` per daemon
	MPIRanks         int           // mpi-startup: ranks of each MPI job (on 4 nodes)
	MPIRuns          int           // mpi-startup: timed MPI jobs per daemon
	MPIWarmup        bool          // mpi-startup: one untimed MPI job first
}

// Full is `make bench`: the scenarios, sized to finish in well under 15 minutes on
// two cores.
func Full() Profile {
	return Profile{
		Name: "full", VUs: []int{1, 16, 256, 1000, 5000}, StatusVUs: []int{16},
		Warmup: time.Second, Duration: 5 * time.Second,
		Holds: []int{1000, 5000}, HoldRamp: 6 * time.Second, HoldProbe: 4 * time.Second, HoldProbeRate: 10,
		OpenHeld: 1000, OpenDuration: 8 * time.Second, OpenRateFraction: 0.5,
		RPCTimeout: flood.DefaultTimeout, IdleSample: 2 * time.Second, Settle: 500 * time.Millisecond,
		MungeOps: 4000, MungeConcurrency: []int{1, 2, 4, 16, 64}, TokenOps: 40000,
		// 200 tasks: slurmctld starts about one per core per second here, so a
		// 1,000-task array would take ~8 min per daemon and break the 15-min budget.
		JobArray: 1000, JobArrayTimeout: 5 * time.Minute, StepSleep: 30 * time.Second, StepSamples: 10,
		SrunRuns: 100,
		MPIRanks: 64, MPIRuns: 5, MPIWarmup: true,
	}
}

// Smoke is `make bench-smoke`: every scenario, tiny (about a minute, most of it waiting for
// the stock slurmd to drop idle connections it holds until MessageTimeout).
func Smoke() Profile {
	return Profile{
		Name: "smoke", VUs: []int{1, 16}, StatusVUs: []int{1},
		Warmup: 200 * time.Millisecond, Duration: time.Second,
		Holds: []int{200}, HoldRamp: 3 * time.Second, HoldProbe: time.Second, HoldProbeRate: 10,
		OpenHeld: 200, OpenDuration: time.Second, OpenRateFraction: 0.5,
		RPCTimeout: flood.DefaultTimeout, IdleSample: 300 * time.Millisecond, Settle: 100 * time.Millisecond,
		MungeOps: 200, MungeConcurrency: []int{1, 16}, TokenOps: 2000,
		JobArray: 20, JobArrayTimeout: 2 * time.Minute, StepSleep: 8 * time.Second, StepSamples: 5,
		SrunRuns: 10,
		MPIRanks: 8, MPIRuns: 1,
	}
}

// Target is one server under test with the client's handles on it.
type Target struct {
	results.Target
	Dialer *flood.Dialer
	// ChecksCreds: the target verifies each request's credential, so every RPC needs a fresh
	// one (munged refuses a replayed credential; auth/slurm has no replay cache, but a real
	// sender never reuses a token either).
	ChecksCreds bool
	Node        string // node name (daemons)
	StatsAddr   string // limit servers
}

// Env is what scenarios run against. Driven from one goroutine.
type Env struct {
	Ctx     context.Context
	Profile Profile
	// RepoRoot is the repository the bench runs from (the MPI test program's source is there).
	RepoRoot string
	Stack    launch.Stack
	Cluster  *launch.Cluster
	Targets  []*Target
	// Auth is the bench's own credential maker: a munge client of the private munged, or
	// authslurm with the cluster's slurm.key.
	Auth auth.Authenticator
	// Pools hold pre-made munge credentials (auth/munge); Minters make auth/slurm tokens as
	// requests are sent (auth/slurm). One of the two is set.
	Pools    map[slurmproto.MsgType]*flood.Pool
	Minters  map[slurmproto.MsgType]*flood.Minter
	Recycled map[slurmproto.MsgType]*flood.Recycled
	Res      *results.Results
	Out      io.Writer // progress lines
	Logf     func(format string, args ...any)
	// FillParallel is the number of concurrent credential encodes when filling pools.
	FillParallel int
}

// Target returns the target named name (nil if absent).
func (e *Env) Target(name string) *Target {
	for _, t := range e.Targets {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Request is the kind of request msg the client sends in this run: the stack's header version
// and auth plugin.
func (e *Env) Request(msg slurmproto.MsgType) flood.Request {
	return flood.Request{Type: msg, Version: e.Stack.Protocol(), Plugin: e.Auth.PluginID()}
}

// want is the correct reply to msg in this run.
func (e *Env) want(msg slurmproto.MsgType) (flood.Want, error) { return flood.WantFor(e.Request(msg)) }

// source returns the frames for n RPCs of type msg to t: for a target that checks
// credentials, fresh munge credentials from the pool (topped up now, outside any timed
// phase) or auth/slurm tokens minted as each request is sent; recycled ones for the no-auth
// server.
func (e *Env) source(t *Target, msg slurmproto.MsgType, n int) (flood.Source, error) {
	if !t.ChecksCreds {
		return e.Recycled[msg], nil
	}
	if m := e.Minters[msg]; m != nil {
		return m, nil
	}
	p := e.Pools[msg]
	if p == nil {
		return nil, fmt.Errorf("no credential source for %v", msg)
	}
	st, err := p.TopUp(e.Ctx, e.Auth, n, e.FillParallel)
	if st.Made > 0 {
		e.Res.Creds.Made += int64(st.Made)
		e.Res.Creds.Seconds += st.Duration.Seconds()
		if e.Res.Creds.Seconds > 0 {
			e.Res.Creds.Rate = float64(e.Res.Creds.Made) / e.Res.Creds.Seconds
		}
		e.Logf("  made %d credentials in %.1fs (%.0f/s)", st.Made, st.Duration.Seconds(), st.Rate())
	}
	return p, err
}

// sourceErr is why src failed to make a frame during a run (nil if it never did).
func sourceErr(src flood.Source) error {
	if m, ok := src.(*flood.Minter); ok {
		return m.Err()
	}
	return nil
}

// credsFor is how many fresh credentials a run of d at up to the munge ceiling may use, with
// margin: no daemon that decodes each request's credential can go faster than munged lets it.
//
// Once some closed-loop runs have been measured, the estimate is twice the best rate any
// credential-decoding target reached so far (plus a floor), which wastes fewer credentials;
// a run that still runs dry ends early and says so in the results.
func (e *Env) credsFor(d time.Duration, extra int) int {
	ceiling := e.Res.Munge.CredCeiling()
	if ceiling <= 0 {
		ceiling = 5000
	}
	est := ceiling * 1.5
	var seen float64
	for _, c := range e.Res.Closed {
		if t := e.Target(c.Target); t != nil && t.ChecksCreds {
			seen = max(seen, c.Stats.Throughput)
		}
	}
	if seen > 0 {
		est = min(est, 2*seen+1000)
	}
	return int(math.Ceil(est*d.Seconds())) + extra + 50
}

// sampler starts sampling t's process.
func (e *Env) sampler(t *Target) *procstat.Sampler {
	return procstat.Start(t.PID, procstat.DefaultInterval)
}

// progress returns a progress printer for a run on t.
func (e *Env) progress(label string, s *procstat.Sampler) *flood.Progress {
	if e.Out == nil {
		return nil
	}
	return &flood.Progress{Out: e.Out, Label: label, Status: func() string {
		l := s.Last()
		return fmt.Sprintf("rss=%.1fMiB thr=%d fds=%d", float64(l.RSSKB)/1024, l.Threads, l.FDs)
	}}
}

// settle waits until t's descriptors are back near base (the daemon has closed what the last
// run left) or MessageTimeout+2s have passed, then pauses Profile.Settle.
func (e *Env) settle(t *Target, baseFDs int) {
	deadline := time.Now().Add(launch.MessageTimeout + 2*time.Second)
	for time.Now().Before(deadline) && e.Ctx.Err() == nil {
		s, err := procstat.Read(t.PID)
		if err != nil || s.FDs <= baseFDs+8 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(e.Profile.Settle)
}

// cpuMark records CPU times at the start of a run.
type cpuMark struct {
	daemon, munged, client time.Duration
	machine                procstat.Machine
}

func (e *Env) cpuNow(t *Target) cpuMark {
	m, _ := procstat.MachineCPU()
	var munged time.Duration // auth/slurm: no munged
	if e.Cluster != nil && e.Cluster.Munged != nil {
		munged = procstat.CPU(e.Cluster.Munged.PID())
	}
	return cpuMark{procstat.CPU(t.PID), munged, procstat.CPU(os.Getpid()), m}
}

func (e *Env) cpuSince(t *Target, m cpuMark) results.CPU {
	return e.cpuNow(t).since(m)
}

// since is the CPU used from m to n.
func (n cpuMark) since(m cpuMark) results.CPU {
	return results.CPU{Daemon: (n.daemon - m.daemon).Seconds(), Munged: (n.munged - m.munged).Seconds(),
		Client: (n.client - m.client).Seconds(), Busy: (n.machine.Busy - m.machine.Busy).Seconds(),
		IRQ: (n.machine.IRQ - m.machine.IRQ).Seconds(), Total: (n.machine.Total - m.machine.Total).Seconds()}
}

// kernelCounters reads TcpExt ListenOverflows and ListenDrops.
func kernelCounters() (overflows, drops int64) {
	f, err := os.Open("/proc/net/netstat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var names []string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "TcpExt:" {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		for i := 1; i < len(fields) && i < len(names); i++ {
			v, _ := strconv.ParseInt(fields[i], 10, 64)
			switch names[i] {
			case "ListenOverflows":
				overflows = v
			case "ListenDrops":
				drops = v
			}
		}
		break
	}
	return overflows, drops
}

// timeWait reads the number of TCP sockets in TIME_WAIT from /proc/net/sockstat.
func timeWait() int64 {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "TCP:" {
			for i := 1; i+1 < len(f); i += 2 {
				if f[i] == "tw" {
					v, _ := strconv.ParseInt(f[i+1], 10, 64)
					return v
				}
			}
		}
	}
	return 0
}

type kernelMark struct{ overflows, drops int64 }

func kernelNow() kernelMark {
	o, d := kernelCounters()
	return kernelMark{o, d}
}

func kernelSince(m kernelMark) results.Kernel {
	n := kernelNow()
	return results.Kernel{ListenOverflows: n.overflows - m.overflows, ListenDrops: n.drops - m.drops, TimeWaitAfter: timeWait()}
}
