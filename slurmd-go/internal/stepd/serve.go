//go:build linux

package stepd

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/cgroup"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/clusterauth"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/ctld"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/logging"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/proc"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/userenv"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Options tune a step manager; the zero value is production.
type Options struct {
	// Ctld reaches slurmctld; nil builds a munge-signing client from the spec.
	Ctld CtldCaller
	// CompleteRetry is the batch completion schedule (zero: CompleteBatchRetry).
	CompleteRetry RetrySchedule
	// SelfPath is the binary run as the task helper ("" = this executable).
	SelfPath string
	// RunningWait overrides RunningWait.
	RunningWait time.Duration
	// CgroupManager picks the cgroup hierarchy (nil: cgroup.New probing).
	CgroupManager func(root string) (cgroup.Manager, error)
	// DeviceManager picks the device controller (nil: cgroup.NewDevices
	// probing).
	DeviceManager func(root string) (cgroup.DeviceManager, error)
	// Logger overrides the log built from the spec.
	Logger hclog.Logger
}

func (o Options) completeRetry() RetrySchedule {
	if o.CompleteRetry.Attempts <= 0 {
		return CompleteBatchRetry
	}
	return o.CompleteRetry
}

func (o Options) selfPath() (string, error) {
	if o.SelfPath != "" {
		return o.SelfPath, nil
	}
	return os.Executable()
}

func (o Options) runningWait() time.Duration {
	if o.RunningWait > 0 {
		return o.RunningWait
	}
	return RunningWait
}

func (o Options) cgroupManager(root string) (cgroup.Manager, error) {
	if o.CgroupManager != nil {
		return o.CgroupManager(root)
	}
	return cgroup.New(cgroup.Options{Root: root})
}

func (o Options) deviceManager(root string) (cgroup.DeviceManager, error) {
	if o.DeviceManager != nil {
		return o.DeviceManager(root)
	}
	return cgroup.NewDevices(cgroup.Options{Root: root})
}

// Main runs a step manager subcommand and returns the exit status.
func Main(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: slurmstepd-go serve (started by slurmd-go)")
		return 2
	}
	switch args[0] {
	case stepapi.CmdServe:
		return Serve(Options{})
	case stepapi.CmdTask:
		if len(args) > 1 && args[1] == spankTaskArg {
			return SpankTask()
		}
		return Task()
	case userenv.CmdGetenv:
		if err := userenv.Dump(os.Stdout); err != nil {
			return 1
		}
		return 0
	case userenv.CmdSuExec:
		return userenv.SuExec(args[1:])
	}
	fmt.Fprintf(os.Stderr, "slurmstepd-go: unknown command %q\n", args[0])
	return 2
}

// Serve is "slurmstepd-go serve" on the fds stepapi.Launch passes: 3 the
// spec and then the ack, 4 the report.
func Serve(o Options) int {
	// Nothing but fds 3 and 4 comes from the daemon on purpose; neither
	// reaches a job, and no inherited descriptor does either.
	_ = proc.CloseInherited(5)
	_ = proc.CloseOnExecFrom(3)
	_ = syscall.SetNonblock(3, true) // so the ack wait can have a deadline
	in := os.NewFile(3, "spec")
	rep := os.NewFile(4, "report")
	if in == nil || rep == nil {
		fmt.Fprintln(os.Stderr, "slurmstepd-go serve: run by slurmd-go only")
		return 2
	}
	return ServeWith(in, rep, o)
}

// ServeWith runs a step manager reading the spec and the ack from in and
// writing its readiness report to rep. It returns when the step is over.
func ServeWith(in *os.File, rep io.WriteCloser, o Options) int {
	// Like slurmstepd, ignore the signals a terminal or an admin's kill
	// would send, without SIG_IGN (which the job would inherit).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGPIPE, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGTSTP)
	go func() {
		for range sigs {
		}
	}()

	report := func(r stepapi.Report) {
		if err := stepapi.WriteReport(rep, r); err != nil && o.Logger != nil {
			o.Logger.Error("report to slurmd-go", "error", err)
		}
		rep.Close()
	}
	spec, err := stepapi.ReadSpec(in)
	if err != nil {
		report(stepapi.Report{RC: slurmproto.ESlurmdSetupEnvironmentError, Error: err.Error()})
		return 1
	}
	log := o.Logger
	if log == nil {
		l, closer, err := logging.New("", logging.Options{File: spec.LogFile, Level: spec.LogLevel})
		if err != nil {
			l, closer, _ = logging.New("", logging.Options{Level: spec.LogLevel})
		}
		if closer != nil {
			defer closer.Close()
			// Runtime panics and fatal errors go to fd 2: make that the
			// log instead of /dev/null.
			if f, ok := closer.(*os.File); ok {
				_ = unix.Dup2(int(f.Fd()), 2)
			}
		}
		log = l
	}
	log = log.Named("stepd")
	if o.Ctld == nil {
		c, err := newCtld(spec, log)
		if err != nil {
			log.Error("slurmctld client", "error", err)
			report(stepapi.Report{RC: slurmproto.ESlurmdSetupEnvironmentError, Error: err.Error()})
			return 1
		}
		o.Ctld = c
	}
	newFn := newStep
	switch spec.Kind {
	case stepapi.KindTasks:
		newFn = newTaskStep
	case stepapi.KindExtern:
		newFn = newExternStep
	}
	s, err := newFn(spec, o, log)
	if err != nil {
		log.Error("step setup failed", "kind", spec.Kind, "error", err)
		report(stepapi.Report{RC: setupRC(err), Error: err.Error()})
		return 1
	}
	report(stepapi.Report{PID: os.Getpid(), Socket: s.sockPath})
	if !waitAck(in, stepapi.AckTimeout) {
		log.Error("slurmd-go did not acknowledge the launch; not running the job")
		s.closeSocket()
		s.removeBatchScript()
		return 1
	}
	in.Close()
	s.log.Info("launching step", "kind", spec.Kind, "uid", s.uid)
	s.run()
	return 0
}

func waitAck(in *os.File, timeout time.Duration) bool {
	_ = in.SetReadDeadline(time.Now().Add(timeout))
	var b [1]byte
	n, err := in.Read(b[:])
	return err == nil && n == 1
}

// newCtld is the slurmctld client of the step manager, with the cluster's
// auth plugin from the spec.
func newCtld(spec *stepapi.StartSpec, log hclog.Logger) (CtldCaller, error) {
	m, err := clusterauth.New(clusterauth.Options{
		AuthType: spec.AuthType, ConfFile: spec.ConfFile, ClusterName: spec.ClusterName, Hostname: spec.Hostname,
		MungeSocket: spec.MungeSocket, TTL: spec.MungeTTL, AllowReplay: spec.MungeAllowReplay,
		SlurmUserID: spec.SlurmUserUID, Version: func() uint16 { return spec.ProtocolVersion }, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	cfg := ctld.Config{
		Hosts:          spec.CtldHosts,
		MessageTimeout: spec.MessageTimeout,
		HashPolicy:     auth.HashPolicy{BlockNullHash: spec.BlockNullHash, BlockZeroHash: spec.BlockZeroHash},
	}
	if cfg.MessageTimeout <= 0 {
		cfg.MessageTimeout = 10 * time.Second
	}
	c := ctld.New(m, func() ctld.Config { return cfg }, log)
	// The step speaks its launch's version: the one slurmctld and srun
	// talk to this node in.
	c.Pin(spec.ProtocolVersion)
	return c, nil
}

// Length-prefixed frames on the helper's config pipe.

func writeFrameTo(w io.Writer, b []byte) error {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(out, b...))
	return err
}

func readFrameFrom(r io.Reader) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n > stepapi.MaxSpecSize {
		return nil, fmt.Errorf("stepd: frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
