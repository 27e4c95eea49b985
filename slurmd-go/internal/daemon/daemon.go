// Package daemon is the composition root of slurmd-go: it builds the
// configuration, the authenticator, the RPC server and the registration
// engine, and runs them until SIGTERM or REQUEST_SHUTDOWN.
//
//	start ─▶ config ─▶ take over pidfile ─▶ bind port ─▶ pidfile ─▶ serve ─┬─▶ register (back-off)
//	                                                                        ├─▶ SIGHUP/RECONFIGURE: reload, re-register
//	                                                                        └─▶ SIGTERM/SHUTDOWN: stop serving, exit
//
// Shutdown is not Kill: stopping the daemon never signals a job.
package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/renameio/v2"
	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/clusterauth"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/ctld"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/forward"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/fwddata"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/handlers"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/hostinfo"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/jobmgr"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/logging"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/metrics"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/pidfile"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/probes"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpcserver"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/sack"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// versionString is the Slurm version reported when speaking protocol v
// (22.05's before the controller's release is known).
func versionString(v uint16) string { return slurmproto.ReleaseVersion(v) }

// ProtocolEnv pins the protocol release ("24.11") instead of negotiating
// it with slurmctld.
const ProtocolEnv = "TIEE_SLURM_PROTOCOL"

// protocolFile, in SlurmdSpoolDir, keeps the release last negotiated, which
// a restarted daemon tries first.
const protocolFile = "slurmd-go.protocol"

// Named timeouts.
const (
	// TakeOverTimeout bounds the wait for an older daemon to release the pid file.
	TakeOverTimeout = 30 * time.Second
	// ShutdownTimeout bounds the wait for in-flight RPCs at exit.
	ShutdownTimeout = 10 * time.Second
	// RegisterMaxDelay is slurmd's back-off ceiling between registrations.
	RegisterMaxDelay = 128 * time.Second
	// HealthCheckTimeout bounds one HealthCheckProgram run.
	HealthCheckTimeout = 60 * time.Second
)

// Daemon is one running slurmd-go.
type Daemon struct {
	log       hclog.Logger
	logCloser io.Closer
	cfg       atomic.Pointer[config.Config]
	auth      auth.Authenticator
	disp      *rpc.Dispatcher
	jobs      *jobmgr.Manager
	srv       rpcserver.Listener
	ctld      *ctld.Client
	hw        hostinfo.Info // probed at start (and on reconfigure)
	hwMu      sync.Mutex    // guards hw

	// metrics is the telemetry (nil unless --metrics-addr); its Jobs
	// registry is what the step launches feed.
	metrics *metrics.Metrics

	started     atomic.Int64 // unix ns of the daemon's start (a 24.11+ reconfigure starts it anew)
	firstReg    atomic.Int64 // slurmd_start_time: unix time of the first registration message
	lastCtldMsg atomic.Int64
	wantResp    atomic.Bool   // ask slurmctld for the TRES list on the next registration
	regStatus   atomic.Uint32 // status of the next registration (ESLURMD_PROLOG_FAILED drains)
	ready       probes.State  // what /readyz reports
	k8s         k8sState      // what the Kubernetes Node's labels gave (--k8s-node)
	confCache   string        // configless: the conf-cache directory; "" with a local slurm.conf
	tresMu      sync.Mutex
	tres        []slurmproto.TRESRec // guarded by tresMu

	regKick     chan struct{}
	releaseKick chan struct{} // the controller's release changed
	stop        context.CancelFunc
	reconfig    chan struct{}

	debugMu sync.Mutex
	debug   debugOverride // guarded by debugMu

	gres gresState // the node's GRES (gres.go)
}

// Main runs the daemon for the command line flags and returns the exit code.
func Main(ctx context.Context, f config.Flags) int {
	// slurmd's closeall(3): what the daemon inherited never reaches a job.
	_ = proc.CloseInherited(3)
	if f.PrintVersion {
		fmt.Println("slurm " + versionString(slurmproto.Spoken()[0]))
		return 0
	}
	configless := false
	if confServer(f) != "" && !f.PrintConfig && (f.ConfServer != "" || !fileExists(f.ConfFile)) {
		// stock: --conf-server wins over a file; $SLURM_CONF_SERVER only
		// serves a node without one
		if err := fetchConfig(ctx, &f, os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "slurmd-go: fatal: %v\n", err)
			return 1
		}
		configless = true
	}
	// Until the controller's release is known the files are read as any
	// release would read them; run reads them again as that release.
	cfg, err := config.LoadAs(f, startRelease())
	if err != nil && !f.PrintConfig {
		printConfError(os.Stderr, err)
		return 1
	}
	if err == nil && !f.PrintConfig { // stock slurmd -C reads no slurm.conf
		printConfWarnings(os.Stderr, cfg)
	}
	if f.PrintConfig {
		return printConfig(cfg)
	}
	if f.PrintGres {
		return printGres(os.Stderr, cfg, newGPUDetector())
	}
	if err := checkPrivileges(os.Stderr, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "slurmd-go: fatal: %v\n", err)
		return 1
	}
	if _, err := metrics.ResolveAddr(f.MetricsAddr); err != nil {
		fmt.Fprintf(os.Stderr, "slurmd-go: fatal: --metrics-addr: %v\n", err)
		return 1
	}
	if !f.Foreground {
		if done, err := daemonize(); done || err != nil {
			if err != nil {
				fmt.Fprintf(os.Stderr, "slurmd-go: fatal: daemonize: %v\n", err)
				return 1
			}
			return 0
		}
	}
	d, err := newDaemon(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "slurmd-go: fatal: %v\n", err)
		return 1
	}
	if configless {
		d.confCache = filepath.Dir(f.ConfFile)
	}
	if err := d.run(ctx); err != nil {
		d.log.Error("fatal", "error", err)
		printConfError(os.Stderr, err)
		return 1
	}
	return 0
}

func newDaemon(cfg *config.Config) (*Daemon, error) {
	log, closer, err := logging.New("slurmd", logging.Options{File: cfg.LogFile, Level: int(cfg.Conf.SlurmdDebug), Verbose: cfg.Flags.Verbose})
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		log:         log.With("node", cfg.NodeName),
		logCloser:   closer,
		regKick:     make(chan struct{}, 1),
		releaseKick: make(chan struct{}, 1),
		reconfig:    make(chan struct{}, 1),
		debug:       debugOverride{level: -1},
	}
	d.gres.detector = newGPUDetector()
	d.cfg.Store(cfg)
	d.started.Store(time.Now().UnixNano())
	d.wantResp.Store(true)
	if uid := uint32(os.Getuid()); uid != cfg.Conf.SlurmdUserID {
		return nil, fmt.Errorf("you are running slurmd as uid %d, not SlurmdUser %s(%d); add SlurmdUser to slurm.conf to run as this user",
			uid, cfg.Conf.SlurmdUser, cfg.Conf.SlurmdUserID)
	}
	a, err := clusterauth.New(authOptions(cfg, d.log, func() uint16 {
		if d.ctld != nil {
			return d.ctld.Version()
		}
		return 0
	}))
	if err != nil {
		return nil, err
	}
	if m, ok := a.(*munge.Munge); ok {
		// As auth/munge does at start: a munged that lets root read
		// credentials restricted to others would let any node impersonate
		// users.
		sctx, cancel := context.WithTimeout(context.Background(), rpc.DefaultAuthTimeout)
		defer cancel()
		if err := m.SelfCheck(sctx); err != nil {
			return nil, fmt.Errorf("daemon: munge self-check: %w", err)
		}
	}
	d.auth = a
	hw, err := hostinfo.Probe(cfg.TmpFS)
	if err != nil {
		return nil, fmt.Errorf("daemon: probe hardware: %w", err)
	}
	d.hw = hw
	if err := d.adoptConfig(cfg, hw); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Daemon) config() *config.Config { return d.cfg.Load() }

// privileged is _slurm_authorized_user: root or SlurmUser.
func (d *Daemon) privileged(uid uint32) bool {
	return uid == 0 || uid == d.config().Conf.SlurmUserID
}

func (d *Daemon) settings(cfg *config.Config) rpc.Settings {
	return rpc.Settings{SlurmUID: cfg.Conf.SlurmUserID, SlurmdUID: cfg.Conf.SlurmdUserID, HashPolicy: cfg.HashPolicy(),
		ReplyVersion: d.ctld.Version}
}

// authOptions are the auth plugin's settings from slurm.conf; version gives
// the protocol auth/slurm tokens name (the controller's).
func authOptions(cfg *config.Config, log hclog.Logger, version func() uint16) clusterauth.Options {
	c := cfg.Conf
	return clusterauth.Options{
		AuthType: c.AuthType, ConfFile: c.File, ClusterName: c.ClusterName, Hostname: cfg.Hostname,
		MungeSocket: c.AuthInfo.Socket, TTL: c.AuthInfo.TTL, AllowReplay: cfg.MultipleSlurmd,
		SlurmUserID: c.SlurmUserID, Version: version, Logger: log,
	}
}

// SackSocket is where slurmd serves auth/slurm's SACK (sack.c): local
// srun, scontrol and step managers of jobs on this node get tokens there.
const SackSocket = "/run/slurm/sack.socket"

// startSack serves SACK for an auth/slurm cluster, unless AuthInfo has
// disable_sack. As stock, the socket is never removed; the last daemon
// started on a host owns it.
func (d *Daemon) startSack(ctx context.Context, cfg *config.Config) (*sack.Server, error) {
	svc, ok := d.auth.(sack.Service)
	if !ok || authslurm.ParseAuthInfo(cfg.Conf.AuthInfo.Raw).DisableSACK {
		return nil, nil
	}
	v := d.ctld.Version()
	owner := cfg.Conf.SlurmUserID // 24.11 _prepare_run_dir
	if v >= slurmproto.Version2605 {
		owner = cfg.Conf.SlurmdUserID
	}
	ln, err := sack.Listen(SackSocket, owner, d.log)
	if err != nil {
		return nil, fmt.Errorf("daemon: sack: %w", err)
	}
	srv, err := sack.NewServer(sack.ServerConfig{Service: svc, Version: v, Logger: d.log})
	if err != nil {
		ln.Close()
		return nil, err
	}
	// Not ended by ctx: run shuts it down after stop, waiting for the
	// requests it has accepted (sack.Server.Shutdown).
	go func() {
		if err := srv.Serve(context.WithoutCancel(ctx), ln); err != nil {
			d.log.Error("sack server stopped", "error", err)
		}
	}()
	d.log.Debug("serving sack", "socket", SackSocket)
	return srv, nil
}

// pinnedRelease is the release ProtocolEnv names (0 if none, or one
// slurmd-go does not speak).
func pinnedRelease() (uint16, error) {
	s := os.Getenv(ProtocolEnv)
	if s == "" {
		return 0, nil
	}
	v, err := slurmproto.ParseRelease(s)
	if err != nil || !slurmproto.Speaks(v) {
		return 0, fmt.Errorf("daemon: %s=%q: not a release slurmd-go speaks (%s)", ProtocolEnv, s, releaseList())
	}
	return v, nil
}

// startRelease is how slurm.conf is read at start: as the pinned release,
// else leniently.
func startRelease() uint16 {
	if v, err := pinnedRelease(); err == nil && v != 0 {
		return v
	}
	return slurmconf.Lenient
}

// StartNegotiateTimeout bounds the wait for the controller's release at
// start; a controller that is down is followed later by registration.
const StartNegotiateTimeout = 10 * time.Second

// setupProtocol pins the release from ProtocolEnv, or has the controller
// client try the one an earlier daemon negotiated first, and saves every
// release it settles on (and re-reads the configuration as that release).
func (d *Daemon) setupProtocol(spool string) error {
	v, err := pinnedRelease()
	if err != nil {
		return err
	}
	if v != 0 {
		d.ctld.Pin(v)
		d.log.Info("protocol pinned", "release", slurmproto.ReleaseName(v), "by", ProtocolEnv)
		return nil
	}
	path := filepath.Join(spool, protocolFile)
	if b, err := os.ReadFile(path); err == nil {
		if v, err := slurmproto.ParseRelease(strings.TrimSpace(string(b))); err == nil && slurmproto.Speaks(v) {
			d.ctld.TryFirst(v)
		}
	}
	d.ctld.OnVersion = func(v uint16) {
		if err := renameio.WriteFile(path, []byte(slurmproto.ReleaseName(v)+"\n"), 0o644, renameio.WithTempDir(spool)); err != nil {
			d.log.Warn("cannot save the negotiated release", "path", path, "error", err)
		}
		select {
		case d.releaseKick <- struct{}{}:
		default:
		}
	}
	return nil
}

// adoptRelease reads the configuration again as the slurmd of the
// controller's release does, unless that is how it was read. An error is
// the same fatal error that release's slurmd stops with at start.
func (d *Daemon) adoptRelease() error {
	v := d.ctld.Version()
	if v == 0 || d.config().Conf.Version == v {
		return nil
	}
	if err := d.reloadAs(v); err != nil {
		return err
	}
	d.log.Info("configuration read as the controller's release", "release", slurmproto.ReleaseName(v))
	return nil
}

func releaseList() string {
	var l []string
	for _, v := range slurmproto.Spoken() {
		l = append(l, slurmproto.ReleaseName(v))
	}
	return strings.Join(l, ", ")
}

func (d *Daemon) run(parent context.Context) error {
	defer func() {
		if d.logCloser != nil {
			d.logCloser.Close()
		}
	}()
	cfg := d.config()
	ctx, stop := context.WithCancel(parent)
	d.stop = stop
	defer stop()
	d.log.Info("slurmd-go started", "speaks", releaseList(), "pid", os.Getpid(), "conf", cfg.Flags.ConfFile, "port", cfg.Port)

	tctx, cancel := context.WithTimeout(ctx, TakeOverTimeout)
	if old, err := pidfile.TakeOver(tctx, cfg.PidFile); err != nil {
		cancel()
		return err
	} else if old != 0 {
		d.log.Info("killed old slurmd", "old_pid", old)
	}
	cancel()
	if err := os.MkdirAll(cfg.SpoolDir, 0o755); err != nil {
		return fmt.Errorf("daemon: spool dir %s: %w", cfg.SpoolDir, err)
	}

	fwd := forward.New(forward.Config{
		Resolve:        func(n string) (string, bool) { return d.config().NodeAddr(n) },
		TreeWidth:      int(cfg.Conf.TreeWidth),
		MessageTimeout: cfg.MessageTimeout(),
	}, d.log)
	d.ctld = ctld.New(d.auth, func() ctld.Config {
		c := d.config()
		return ctld.Config{Hosts: c.CtldHosts, MessageTimeout: c.MessageTimeout(), HashPolicy: c.HashPolicy()}
	}, d.log)
	if err := d.setupProtocol(cfg.SpoolDir); err != nil {
		return err
	}
	nctx, cancel := context.WithTimeout(ctx, StartNegotiateTimeout)
	if _, err := d.ctld.Negotiate(nctx); err != nil {
		d.log.Warn("slurmctld's release is not known yet; reading slurm.conf as any release would until it is", "error", err)
	}
	cancel()
	if err := d.adoptRelease(); err != nil {
		return err
	}
	cfg = d.config()
	// As stock: GRES are loaded before the first registration, and a
	// gres.conf it cannot use stops the daemon.
	gn, err := d.loadGres(ctx, d.gresRelease())
	if err != nil {
		return err
	}
	stepd, err := stepdPath()
	if err != nil {
		return err
	}
	if _, err := os.Stat(stepd); err != nil {
		// Nodes still register and serve; job launches fail with a clear error.
		d.log.Error("step manager binary missing: jobs cannot start here", "path", stepd, "error", err, "hint", "make build, or set "+StepdEnv)
	}
	d.jobs = jobmgr.New(d.config, d.ctld, d.auth, func() int { return int(d.hardware().CPUs) }, stepd, d, d.log)
	bc := d.newBcast()
	d.jobs.SetLibDirs(bc.LibDirs)
	d.jobs.SetGresRecords(d.gresRecords)
	// slurmd.c _slurmd_init: the plugin stack's slurmd context, fatal on
	// failure; plugins are built for one release, so it waits for the
	// controller's unless that is pinned.
	if d.ctld.Version() != 0 {
		if err := d.jobs.StartSpank(); err != nil {
			d.log.Error("Unable to initialize plugin stack", "error", err)
			return fmt.Errorf("spank: plugin stack initialization failed: %w", err)
		}
	}
	defer d.jobs.StopSpank()
	routes := handlers.Merge(handlers.NodeRoutes(d), handlers.JobRoutes(bcastJobs{Jobs: d.jobs, bcast: bc}, d.privileged), handlers.BcastRoutes(bc),
		handlers.ForwardDataRoutes(fwddata.Node{NodeName: func() string { return d.config().NodeName }, Log: d.log.Named("fwddata")}))
	d.disp = rpc.New(d.auth, routes, fwd, d.settings(cfg), d.log)
	d.disp.OnCtldMessage = func() { d.lastCtldMsg.Store(time.Now().Unix()) }

	srv, err := newServer(rpcserver.Config{
		Addr:        "tcp://" + cfg.ListenAddr,
		ConnTimeout: cfg.MessageTimeout(),
		Logger:      d.log,
	}, d.disp)
	if err != nil {
		return err
	}
	met, metAddr, err := d.newMetrics(cfg, srv)
	if err != nil {
		return err
	}
	d.metrics = met
	if err := srv.Start(); err != nil {
		return fmt.Errorf("daemon: unable to bind listen port (%d): %w", cfg.Port, err)
	}
	d.srv = srv
	if met != nil {
		metSrv, err := d.startMetrics(ctx, met, metAddr, probes.Handlers{State: &d.ready, ListenAddr: cfg.ListenAddr, StepdPath: stepd, Workers: srv.Probe})
		if err != nil {
			_ = srv.Shutdown(context.Background())
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
			defer cancel()
			if err := metSrv.Shutdown(sctx); err != nil {
				d.log.Warn("metrics server shutdown", "error", err)
			}
		}()
	}
	sackSrv, err := d.startSack(ctx, cfg)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	if sackSrv != nil {
		defer sackSrv.Close()
	}
	topoSrv := d.startTopology(ctx, cfg)
	if topoSrv != nil {
		defer topoSrv.Close()
	}
	pf, err := pidfile.Create(cfg.PidFile)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	d.log.Info("serving", "addr", srv.Addr().String())
	// Before registering: revoked jobs come back, and -c ends the steps of
	// an earlier daemon so that the registration does not list them.
	d.jobs.Recover(ctx, cfg.Flags.CleanStart)

	var runErr error
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	// The Node's first labels before the first registration, so that it
	// carries their features and a dynamic node's topology.
	if err := d.startK8s(ctx, cfg); err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); d.registrationEngine(ctx) }()

	d.startGPUHealth(ctx, cfg, gn)
	d.HealthCheck() // slurmd runs HealthCheckProgram once at start
	d.Reregister()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case s := <-sigs:
			if s == syscall.SIGHUP {
				d.reload()
				continue
			}
			d.log.Info("shutdown requested", "signal", s.String())
			break loop
		case <-d.reconfig:
			d.reload()
		case <-d.releaseKick:
			if err := d.adoptRelease(); err != nil {
				// As that release's slurmd would have at start.
				d.log.Error("slurm.conf is not valid for the controller's release", "error", err)
				runErr = err
				break loop
			}
			if err := d.jobs.StartSpank(); err != nil {
				d.log.Error("Unable to initialize plugin stack", "error", err)
				runErr = fmt.Errorf("spank: plugin stack initialization failed: %w", err)
				break loop
			}
		}
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if sackSrv != nil {
		if err := sackSrv.Shutdown(sctx); err != nil {
			d.log.Warn("shutdown left SACK requests unanswered", "error", err)
		}
	}
	if topoSrv != nil {
		if err := topoSrv.Shutdown(sctx); err != nil {
			d.log.Warn("shutdown left topology API requests unanswered", "error", err)
		}
	}
	if err := srv.Shutdown(sctx); err != nil {
		d.log.Warn("shutdown left requests unfinished", "error", err)
	}
	wg.Wait()
	// Prolog/Epilog and their reports to slurmctld finish; the jobs
	// themselves run on in their step managers.
	d.jobs.Wait(sctx)
	if err := pf.Remove(); err != nil {
		d.log.Warn("cannot remove pid file", "error", err)
	}
	d.log.Info("slurmd-go shutdown completing")
	return runErr
}

// StepdEnv overrides where the step manager binary is; by default it is
// slurmstepd-go beside this binary.
const StepdEnv = "TIEE_SLURMSTEPD"

func stepdPath() (string, error) {
	if p := os.Getenv(StepdEnv); p != "" {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("daemon: own path: %w", err)
	}
	return filepath.Join(filepath.Dir(exe), "slurmstepd-go"), nil
}

// ServerEnv selects the RPC server: "gnet" (default, event loops) or "net"
// (a goroutine per connection). Only the bench sets it, to show what the
// event loop buys with everything else equal.
const ServerEnv = "TIEE_RPC_SERVER"

func newServer(c rpcserver.Config, d rpcserver.Dispatcher) (rpcserver.Listener, error) {
	switch os.Getenv(ServerEnv) {
	case "", "gnet":
		return rpcserver.New(c, d)
	case "net":
		return rpcserver.NewNetServer(c, d)
	default:
		return nil, fmt.Errorf("daemon: %s=%q: want gnet or net", ServerEnv, os.Getenv(ServerEnv))
	}
}

// adoptConfig makes cfg the running configuration. A dynamic node (-Z)
// describes itself: its NodeName line is the hardware plus --conf, the line
// slurmctld creates it from, so what we report matches what it expects.
func (d *Daemon) adoptConfig(cfg *config.Config, hw hostinfo.Info) error {
	if cfg.Flags.Dynamic {
		n, err := slurmconf.ParseNodeLine(dynamicConf(cfg.NodeName, cfg.Flags.DynamicConf, hw))
		if err != nil {
			return fmt.Errorf("daemon: dynamic node line: %w", err)
		}
		c := *cfg
		c.Node = n
		cfg = &c
	}
	d.cfg.Store(cfg)
	return nil
}

// reload re-reads slurm.conf (SIGHUP or REQUEST_RECONFIGURE) as the
// release it was read as. A broken file keeps the running configuration and
// says why.
func (d *Daemon) reload() {
	if err := d.reloadAs(d.config().Conf.Version); err != nil {
		d.log.Error("reconfigure failed, keeping the running configuration", "error", err)
		return
	}
	if d.ctld.Version() >= slurmproto.Version2411 {
		// 24.11 reconfigures by re-executing itself (_try_to_reconfig): the
		// new process has heard nothing from slurmctld yet and starts anew.
		// The steps and the pid (under -D) stay, and so do they here.
		d.lastCtldMsg.Store(0)
		d.started.Store(time.Now().UnixNano())
		d.firstReg.Store(0)
	}
}

// reloadAs reads slurm.conf as release version and adopts it.
func (d *Daemon) reloadAs(version uint16) error {
	old := d.config()
	cfg, err := config.LoadAs(old.Flags, version)
	if err != nil {
		return err
	}
	logConfWarnings(d.log, cfg)
	if cfg.Port != old.Port {
		d.log.Warn("the port changed in slurm.conf; restart the daemon to move to it", "old", old.Port, "new", cfg.Port)
	}
	hw, err := hostinfo.Probe(cfg.TmpFS)
	if err != nil {
		return fmt.Errorf("cannot probe hardware: %w", err)
	}
	if err := d.adoptConfig(cfg, hw); err != nil {
		return err
	}
	d.hwMu.Lock()
	d.hw = hw
	d.hwMu.Unlock()
	if d.disp != nil {
		d.disp.SetSettings(d.settings(cfg))
	}
	d.resetDebug()
	d.log.SetLevel(logging.Level(int(cfg.Conf.SlurmdDebug), cfg.Flags.Verbose))
	d.log.Info("reconfigured", "conf", cfg.Flags.ConfFile, "read_as", releaseOrLenient(version))
	d.Reregister()
	return nil
}

func releaseOrLenient(v uint16) string {
	if v == slurmconf.Lenient {
		return "any release"
	}
	return slurmproto.ReleaseName(v)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
