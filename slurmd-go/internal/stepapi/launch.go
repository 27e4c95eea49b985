package stepapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Named timeouts of the launch handshake.
const (
	// LaunchTimeout bounds Launch when ctx has no earlier deadline: from
	// exec of "serve" to the step manager's readiness report (it decodes
	// the launch body, writes the script and listens on its socket first).
	LaunchTimeout = 60 * time.Second
	// AckTimeout bounds how long a ready step manager waits for the
	// daemon's acknowledgement before it gives up without running the job.
	AckTimeout = LaunchTimeout + 10*time.Second
	// ExitWait bounds waiting for the exit status of a step manager that
	// closed its report pipe without a report.
	ExitWait = time.Second
)

// Subcommands of the step manager binary.
const (
	CmdServe = "serve" // the long-lived step manager
	CmdTask  = "task"  // internal: becomes the user and execs a task
)

// Report is what a step manager sends Launch once it is ready or has
// failed to get ready.
type Report struct {
	RC     uint32 `json:"rc"`               // 0, or a Slurm rc (ESLURMD_*)
	Error  string `json:"error,omitempty"`  // why, when RC != 0
	PID    int    `json:"pid,omitempty"`    // the step manager's pid
	Socket string `json:"socket,omitempty"` // the step socket it listens on
}

// WriteReport sends r (serve side).
func WriteReport(w io.Writer, r Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeFrame(w, b)
}

// ReadReport reads a Report (Launch side; exported for tests).
func ReadReport(r io.Reader) (Report, error) {
	var rep Report
	b, err := readFrame(r, 1<<20)
	if err != nil {
		return rep, err
	}
	err = json.Unmarshal(b, &rep)
	return rep, err
}

// Handle identifies a running step manager.
type Handle struct {
	StepID slurmproto.StepID
	PID    int    // the step manager's pid (not the job's)
	Socket string // its step socket
}

// LaunchError is a launch the step manager refused or failed; RC is the
// Slurm return code to report (ESLURMD_CREATE_BATCH_DIR_ERROR, ...).
type LaunchError struct {
	RC  uint32
	Msg string
}

func (e *LaunchError) Error() string {
	return fmt.Sprintf("stepapi: launch failed: %s: %s", slurmproto.RCName(e.RC), e.Msg)
}

// Sentinels of Launch failures that are not the step manager's verdict.
var (
	ErrLaunchTimeout = errors.New("stepapi: step manager did not report in time")
	ErrNoReport      = errors.New("stepapi: step manager exited without reporting")
)

// RC maps a Launch error to the return code slurmd would use: the step
// manager's own code, else ESLURMD_EXECVE_FAILED (it could not be started
// or did not answer).
func RC(err error) uint32 {
	if err == nil {
		return slurmproto.SlurmSuccess
	}
	var le *LaunchError
	if errors.As(err, &le) {
		return le.RC
	}
	return slurmproto.ESlurmdExecveFailed
}

// SocketPath is the step socket of step id on nodeName under spoolDir
// (step ids printed unsigned, ".het_comp" only for het steps).
func SocketPath(spoolDir, nodeName string, id slurmproto.StepID) string {
	name := fmt.Sprintf("%s/%s_%d.%d", spoolDir, nodeName, id.JobID, id.StepID)
	if id.StepHetComp != slurmproto.NoVal {
		name += fmt.Sprintf(".%d", id.StepHetComp)
	}
	return name
}

// launchStepID is the step a spec starts.
func launchStepID(spec *StartSpec) (slurmproto.StepID, error) {
	if spec.Kind == KindTasks {
		m, err := slurmproto.DecodeBody(spec.ProtocolVersion, slurmproto.RequestLaunchTasks, spec.LaunchBody)
		if err != nil {
			return slurmproto.StepID{}, err
		}
		return m.(*slurmproto.LaunchTasks).StepID, nil
	}
	if spec.Kind == KindExtern {
		m, err := slurmproto.DecodeBody(spec.ProtocolVersion, slurmproto.RequestLaunchProlog, spec.LaunchBody)
		if err != nil {
			return slurmproto.StepID{}, err
		}
		return slurmproto.StepID{JobID: m.(*slurmproto.LaunchProlog).JobID, StepID: slurmproto.StepIDExtern, StepHetComp: slurmproto.NoVal}, nil
	}
	m, err := slurmproto.DecodeBody(spec.ProtocolVersion, slurmproto.RequestBatchJobLaunch, spec.LaunchBody)
	if err != nil {
		return slurmproto.StepID{}, err
	}
	return slurmproto.StepID{JobID: m.(*slurmproto.BatchJobLaunch).JobID, StepID: slurmproto.StepIDBatch, StepHetComp: slurmproto.NoVal}, nil
}

// Launch starts a step manager for spec with the binary at stepdPath and
// returns once it listens on its step socket, or with the error it
// reported (a *LaunchError) or ErrLaunchTimeout/ErrNoReport. The step
// manager runs in its own session, re-parented to init; the caller never
// waits for it. Safe for concurrent use.
func Launch(ctx context.Context, stepdPath string, spec StartSpec) (*Handle, error) {
	if spec.SpecVersion == 0 {
		spec.SpecVersion = SpecVersion
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	launch, err := launchStepID(&spec)
	if err != nil {
		return nil, &LaunchError{RC: slurmproto.ESlurmdSetupEnvironmentError, Msg: err.Error()}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, LaunchTimeout)
		defer cancel()
	}
	specR, specW, err := os.Pipe() // spec, then the ack byte
	if err != nil {
		return nil, fmt.Errorf("stepapi: pipe: %w", err)
	}
	defer specW.Close()
	repR, repW, err := os.Pipe() // the report
	if err != nil {
		specR.Close()
		return nil, fmt.Errorf("stepapi: pipe: %w", err)
	}
	defer repR.Close()
	// The step manager is started directly in its own session (one
	// process start: a Go binary's start-up is most of a step launch). It
	// is this daemon's child until the daemon exits, then init's; a
	// goroutine reaps it.
	cmd := exec.Command(stepdPath, CmdServe)
	cmd.ExtraFiles = []*os.File{specR, repW} // fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	err = cmd.Start()
	specR.Close()
	repW.Close()
	if err != nil {
		return nil, fmt.Errorf("stepapi: start %s: %w", stepdPath, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	writeDone := make(chan error, 1)
	go func() { writeDone <- WriteSpec(specW, &spec) }()

	if d, ok := ctx.Deadline(); ok {
		_ = repR.SetReadDeadline(d)
	}
	repCh := make(chan struct {
		rep Report
		err error
	}, 1)
	go func() {
		r, err := ReadReport(repR)
		repCh <- struct {
			rep Report
			err error
		}{r, err}
	}()
	var rep Report
	select {
	case r := <-repCh:
		if r.err != nil {
			if errors.Is(r.err, os.ErrDeadlineExceeded) {
				_ = cmd.Process.Kill()
				return nil, fmt.Errorf("%w (%s)", ErrLaunchTimeout, LaunchTimeout)
			}
			// No report: the step manager died before it could say why.
			var status error
			select {
			case status = <-exited:
			case <-time.After(ExitWait):
			}
			return nil, fmt.Errorf("%w: %v", ErrNoReport, status)
		}
		rep = r.rep
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%w: %w", ErrLaunchTimeout, ctx.Err())
	}
	if rep.RC != 0 {
		return nil, &LaunchError{RC: rep.RC, Msg: rep.Error}
	}
	if err := <-writeDone; err != nil {
		return nil, fmt.Errorf("stepapi: send spec: %w", err)
	}
	// The ack: from now on the step manager runs the job.
	if _, err := specW.Write([]byte{1}); err != nil {
		return nil, fmt.Errorf("stepapi: ack: %w", err)
	}
	return &Handle{StepID: launch, PID: rep.PID, Socket: rep.Socket}, nil
}

// SuspendStatePath is where a step manager keeps its suspend state
// (internal/suspend): a hidden file beside its socket, which the socket
// scan never takes for a step.
func SuspendStatePath(socket string) string {
	dir, base := filepath.Split(socket)
	return filepath.Join(dir, "."+base+".suspend")
}
