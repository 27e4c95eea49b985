package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/handlers"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/hostinfo"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

var _ handlers.Node = (*Daemon)(nil)

// Load implements handlers.Node.
func (d *Daemon) Load() (uint32, uint64) {
	l, err := hostinfo.ProbeLoad()
	if err != nil {
		d.log.Warn("cannot read load", "error", err)
	}
	return l.CPULoad, l.FreeMem
}

func (d *Daemon) hardware() hostinfo.Info {
	d.hwMu.Lock()
	defer d.hwMu.Unlock()
	return d.hw
}

// Status implements handlers.Node (scontrol show slurmd).
func (d *Daemon) Status() slurmproto.SlurmdStatus {
	cfg := d.config()
	hw := d.hardware()
	var last time.Time
	if t := d.lastCtldMsg.Load(); t != 0 {
		last = time.Unix(t, 0)
	}
	return slurmproto.SlurmdStatus{
		Booted:           time.Unix(0, d.started.Load()),
		LastSlurmctldMsg: last,
		SlurmdDebug:      d.debugLevel(),
		CPUs:             hw.CPUs,
		Boards:           hw.Boards,
		Sockets:          hw.Sockets,
		Cores:            hw.CoresPerSocket,
		Threads:          hw.ThreadsPerCore,
		RealMem:          hw.RealMemory,
		TmpDisk:          hw.TmpDisk,
		PID:              uint32(os.Getpid()),
		Hostname:         cfg.NodeName,
		Logfile:          cfg.LogFile,
		StepList:         "NONE",
		Version:          versionString(d.ctld.Version()),
	}
}

// Energy implements handlers.Node: no energy plugin, so zeros, as slurmd
// with AcctGatherEnergyType=acct_gather_energy/none.
func (d *Daemon) Energy() slurmproto.AcctGatherEnergy {
	return slurmproto.AcctGatherEnergy{NodeName: d.config().NodeName, Sensors: []slurmproto.Energy{{}}}
}

// Reregister implements handlers.Node.
func (d *Daemon) Reregister() {
	d.wantResp.Store(true)
	select {
	case d.regKick <- struct{}{}:
	default:
	}
}

// RegisterWithStatus implements jobmgr.Registrar: the next registration
// carries status (slurmctld drains the node for ESLURMD_PROLOG_FAILED).
func (d *Daemon) RegisterWithStatus(status uint32) {
	d.regStatus.Store(status)
	d.Reregister()
}

// TRES implements jobmgr.Registrar: the TRES of the last
// RESPONSE_NODE_REGISTRATION (nil before one).
func (d *Daemon) TRES() []slurmproto.TRESRec {
	d.tresMu.Lock()
	defer d.tresMu.Unlock()
	return d.tres
}

// Reconfigure implements handlers.Node.
func (d *Daemon) Reconfigure() {
	select {
	case d.reconfig <- struct{}{}:
	default:
	}
}

// ReconfigureWithConfig implements handlers.Node.
func (d *Daemon) ReconfigureWithConfig(files []slurmproto.ConfigFile) {
	if d.confCache != "" {
		if err := WriteConfCache(d.confCache, files); err != nil {
			d.log.Error("configless: the pushed configuration was not cached; keeping the last one", "error", err)
		} else {
			d.log.Info("configless: configuration pushed by slurmctld cached", "files", len(files), "cache", d.confCache)
		}
	}
	d.Reconfigure()
}

// Shutdown implements handlers.Node.
func (d *Daemon) Shutdown() {
	d.log.Info("shutdown requested by slurmctld")
	if d.stop != nil {
		d.stop()
	}
}

// HealthCheck implements handlers.Node.
func (d *Daemon) HealthCheck() { d.healthCheck("") }

// HealthCheckVerdict implements handlers.Node.
func (d *Daemon) HealthCheckVerdict(healthy bool) {
	if healthy {
		d.healthCheck("yes")
	} else {
		d.healthCheck("no")
	}
}

// healthCheck runs HealthCheckProgram; verdict, if set, is exported as
// SLURM_NODE_IS_HEALTHY (26.05 run_script_health_check).
func (d *Daemon) healthCheck(verdict string) {
	prog := d.config().Conf.HealthCheckProgram
	if prog == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), HealthCheckTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, prog)
		if verdict != "" {
			cmd.Env = append(os.Environ(), "SLURM_NODE_IS_HEALTHY="+verdict)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			d.log.Error("HealthCheckProgram failed", "program", prog, "error", err, "output", strings.TrimSpace(string(out)))
			return
		}
		d.log.Debug("HealthCheckProgram ran", "program", prog)
	}()
}

// Reboot implements handlers.Node.
func (d *Daemon) Reboot(req *slurmproto.RebootNodesRequest) {
	prog := d.config().Conf.RebootProgram
	if prog == "" {
		d.log.Error("reboot requested but RebootProgram is not set")
		return
	}
	args := strings.Fields(prog)
	if req != nil && req.Features != "" {
		args = []string{args[0], req.Features}
	}
	d.log.Info("running RebootProgram", "cmd", strings.Join(args, " "))
	if err := exec.Command(args[0], args[1:]...).Start(); err != nil {
		d.log.Error("RebootProgram failed", "error", err)
	}
}

// registrationEngine sends MESSAGE_NODE_REGISTRATION_STATUS at start and
// whenever kicked, retrying with slurmd's back-off (1 s doubling to 128 s).
func (d *Daemon) registrationEngine(ctx context.Context) {
	delay := time.Second
	pending := false
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.regKick:
			pending = true
			delay = time.Second
		case <-timer.C:
		}
		if !pending {
			continue
		}
		if err := d.register(ctx); err != nil {
			d.log.Warn("unable to register with slurmctld", "retry_in", delay.String(), "error", err)
			timer.Reset(delay)
			delay *= 2
			if delay > RegisterMaxDelay {
				delay = RegisterMaxDelay
			}
			continue
		}
		pending = false
	}
}

func (d *Daemon) register(ctx context.Context) error {
	cfg := d.config()
	rctx, cancel := context.WithTimeout(ctx, 2*cfg.MessageTimeout())
	defer cancel()
	v, err := d.ctld.Negotiate(rctx)
	if err != nil {
		d.ready.Failed(err)
		return err
	}
	msg := d.registrationMsg(v)
	reply, err := d.ctld.Call(rctx, msg, auth.UIDAny)
	if err != nil {
		d.ready.Failed(err)
		return err
	}
	switch r := reply.(type) {
	case *slurmproto.NodeRegistrationResponse:
		d.tresMu.Lock()
		d.tres = r.TRES
		d.tresMu.Unlock()
		d.wantResp.Store(false)
		d.log.Debug("slurmctld sent back TRES", "count", len(r.TRES))
	case *slurmproto.ReturnCode:
		if r.RC != 0 {
			d.ready.Refused(slurmproto.RCName(r.RC))
			return fmt.Errorf("daemon: registration refused: %s", slurmproto.RCName(r.RC))
		}
		if msg.Flags&slurmproto.RegFlagResp != 0 {
			// slurmctld answers an invalid registration (INVALID_REG: too
			// few CPUs or memory, say) with SLURM_SUCCESS but without the
			// response asked for, "to avoid having slurmd try to register
			// again continuously" (_slurm_rpc_node_registration). Stock slurmd
			// does not retry either; only readiness says so.
			d.ready.Refused("invalid registration (slurmctld sent no node registration response; its log and the node's Reason say why)")
			d.log.Warn("slurmctld found the registration invalid", "node", cfg.NodeName)
			return nil
		}
	default:
		err := fmt.Errorf("daemon: unexpected registration reply %s", reply.MsgType())
		d.ready.Failed(err)
		return err
	}
	d.ready.Registered()
	if f := d.k8s.registered.Load(); f != nil {
		(*f)()
	}
	d.log.Info("registered with slurmctld", "cpus", msg.CPUs, "real_memory", msg.RealMemory, "release", slurmproto.ReleaseName(v))
	return nil
}

// registrationMsg fills the registration as _fill_registration_msg does,
// for protocol v.
func (d *Daemon) registrationMsg(v uint16) *slurmproto.NodeRegistrationStatus {
	cfg := d.config()
	hw := d.hardware()
	rep := hostinfo.ReportedFor(hw, cfg.Node, cfg.Conf)
	load, _ := hostinfo.ProbeLoad()
	now := time.Now()
	// slurmd_start_time: set by the first registration message built and
	// kept (storing it only after the reply could move it by a second).
	d.firstReg.CompareAndSwap(0, now.Unix())
	start := time.Unix(d.firstReg.Load(), 0)
	m := &slurmproto.NodeRegistrationStatus{
		Timestamp:       now,
		SlurmdStartTime: start,
		Hostname:        cfg.Hostname,
		NodeName:        cfg.NodeName,
		Arch:            hw.Arch,
		OS:              hw.OS,
		CPUs:            rep.CPUs,
		Boards:          rep.Boards,
		Sockets:         rep.Sockets,
		Cores:           rep.CoresPerSocket,
		Threads:         rep.ThreadsPerCore,
		RealMemory:      rep.RealMemory,
		TmpDisk:         rep.TmpDisk,
		UpTime:          uint32(load.UpTime),
		HashVal:         cfg.Conf.Hash,
		CPULoad:         load.CPULoad,
		FreeMem:         load.FreeMem,
		GresInfo:        d.gresInfo(v),
		Version:         versionString(v),
	}
	m.Status = d.regStatus.Swap(0)
	m.Steps = d.jobs.Steps(context.Background())
	if m.HashVal == 0 {
		m.HashVal = slurmproto.NoVal
	}
	if d.wantResp.Load() {
		m.Flags |= slurmproto.RegFlagResp
	}
	if feats, ok := d.k8sFeatures(cfg); ok {
		m.FeaturesAvail, m.FeaturesActive = feats, feats
	}
	if cfg.Flags.Dynamic {
		m.DynamicType = slurmproto.DynNodeNorm
		m.DynamicConf = dynamicConf(cfg.NodeName, cfg.Flags.DynamicConf, hw)
		if spec := d.k8sTopologySpec(v); spec != "" && !strings.Contains(strings.ToLower(cfg.Flags.DynamicConf), "topology=") {
			m.DynamicConf += " Topology=" + spec
		}
	}
	return m
}

// dynamicConf builds the NodeName line slurmctld creates a -Z node from:
// the hardware unless --conf gives the layout, then --conf itself.
func dynamicConf(name, conf string, hw hostinfo.Info) string {
	lc := strings.ToLower(conf)
	s := "NodeName=" + name + " "
	has := func(k string) bool { return strings.Contains(lc, strings.ToLower(k)) }
	if !has("CPUs=") && !has("Boards=") && !has("SocketsPerBoard=") && !has("CoresPerSocket=") && !has("ThreadsPerCore=") {
		boards := hw.Boards
		if boards == 0 {
			boards = 1
		}
		s += fmt.Sprintf("CPUs=%d Boards=%d SocketsPerBoard=%d CoresPerSocket=%d ThreadsPerCore=%d ",
			hw.CPUs, boards, hw.Sockets/boards, hw.CoresPerSocket, hw.ThreadsPerCore)
	}
	if !has("RealMemory=") {
		s += fmt.Sprintf("RealMemory=%d ", hw.RealMemory)
	}
	return s + conf
}

// printConfig is slurmd -C: this host's hardware as a NodeName line, then
// its uptime.
func printConfig(cfg *config.Config) int {
	tmpFS := ""
	name := ""
	if cfg != nil {
		tmpFS, name = cfg.TmpFS, cfg.NodeName
	}
	hw, err := hostinfo.Probe(tmpFS)
	if err != nil {
		fmt.Fprintf(os.Stderr, "slurmd-go: fatal: %v\n", err)
		return 1
	}
	if name == "" {
		name = hw.Hostname
	}
	boards := hw.Boards
	if boards == 0 {
		boards = 1
	}
	fmt.Printf("NodeName=%s CPUs=%d Boards=%d SocketsPerBoard=%d CoresPerSocket=%d ThreadsPerCore=%d RealMemory=%d\n",
		name, hw.CPUs, boards, hw.SocketsPerBoard(), hw.CoresPerSocket, hw.ThreadsPerCore, hw.RealMemory)
	up := time.Duration(hw.UpTime) * time.Second
	days := int(up.Hours()) / 24
	up -= time.Duration(days) * 24 * time.Hour
	fmt.Printf("UpTime=%d-%02d:%02d:%02d\n", days, int(up.Hours()), int(up.Minutes())%60, int(up.Seconds())%60)
	return 0
}

// daemonize re-executes the binary detached (new session, stdio on
// /dev/null) with -D added; done is true in the parent, which then exits.
func daemonize() (done bool, err error) {
	exe, err := os.Executable()
	if err != nil {
		return false, err
	}
	args := append([]string{"-D"}, os.Args[1:]...)
	// os/exec gives nil stdio /dev/null.
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	return true, cmd.Process.Release()
}
