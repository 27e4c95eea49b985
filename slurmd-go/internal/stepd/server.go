//go:build linux

package stepd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/suspend"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// listen creates the step socket (slurmstepd/req.c _domain_socket_create):
// a vestigial socket of the same name is removed first; the socket is
// world-writable (0777), access is checked per request from SO_PEERCRED.
func (s *Step) listen() error {
	path := stepapi.SocketPath(s.spec.SpoolDir, s.spec.NodeName, s.id)
	if st, err := os.Stat(s.spec.SpoolDir); err != nil || !st.IsDir() {
		return failSetup(slurmproto.SlurmError, "stepd: domain socket directory %s: not a directory (%v)", s.spec.SpoolDir, err)
	}
	if _, err := os.Lstat(path); err == nil {
		if err := os.Remove(path); err != nil {
			return failSetup(slurmproto.ESlurmdStepExists, "stepd: unlink stale %s: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return failSetup(slurmproto.SlurmError, "stepd: could not create domain socket: %w", err)
	}
	if err := os.Chmod(path, 0o777); err != nil {
		s.log.Error("chmod socket", "path", path, "error", err)
	}
	s.ln, s.sockPath = ln, path
	go s.accept()
	return nil
}

// closeSocket removes the socket (slurmd then considers the step done) and
// gives open connections SocketDrainTimeout to finish.
func (s *Step) closeSocket() {
	if s.ln == nil {
		return
	}
	s.connMu.Lock()
	s.closing = true
	s.connMu.Unlock()
	_ = s.ln.Close() // unlinks the socket file
	s.clearSuspend()
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(SocketDrainTimeout):
	}
}

func (s *Step) accept() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("accept on step socket", "error", err)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		s.connMu.Lock()
		if s.closing {
			s.connMu.Unlock()
			c.Close()
			return
		}
		s.conns.Add(1)
		s.connMu.Unlock()
		go func() {
			defer s.conns.Done()
			defer c.Close()
			s.serveConn(c)
		}()
	}
}

// peer is the other end of a connection, from SO_PEERCRED.
type peer struct {
	uid uint32
	pid int32
}

func peerCred(c *net.UnixConn) (peer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, err
	}
	if cerr != nil {
		return peer{}, cerr
	}
	return peer{uid: cred.Uid, pid: cred.Pid}, nil
}

// answerVersion is the version the handshake answers a client announcing
// ver. A 24.11 or 26.05 client does nothing for a step manager older than
// its SLURM_MIN_PROTOCOL_VERSION (23.02, 24.11): stepd_get_uid, attach,
// notify and mem limits then fail silently (pam_slurm_adopt found no job
// of the user). So a newer client hears the node's release, capped at
// 24.11, whose requests this server parses as 22.05's: the formats that
// changed (suspend, completion, reconfigure from 23.11, attach from 25.05)
// come only from slurmd-go itself, which announces 22.05.
func (s *Step) answerVersion(ver int32) int32 {
	v := min(ver, int32(s.spec.ProtocolVersion), int32(slurmproto.Version2411))
	return max(v, stepapi.ProtocolVersion)
}

// serveConn is _handle_accept: the handshake, then requests until EOF or
// an error.
func (s *Step) serveConn(c *net.UnixConn) {
	w := &stepapi.Wire{RW: c}
	ver, err := w.ReadInt32()
	if err != nil {
		return
	}
	var o stepapi.Out
	if ver < stepapi.MinProtocolVersion {
		s.log.Error("invalid protocol version on step socket", "version", ver)
		o.Int32(-1)
		_ = o.Send(c)
		return
	}
	p, err := peerCred(c)
	if err != nil {
		o.Int32(-1)
		_ = o.Send(c)
		return
	}
	o.Int32(s.answerVersion(ver))
	if o.Send(c) != nil {
		return
	}
	for {
		req, err := w.ReadInt32()
		if err != nil {
			return // EOF is the normal end
		}
		if s.log.IsTrace() {
			s.log.Trace("step request", "request", stepapi.Request(req), "uid", p.uid)
		}
		if err := s.handle(stepapi.Request(req), w, c, p); err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Debug("step request failed", "request", stepapi.Request(req), "error", err)
			}
			return
		}
	}
}

var errUnknownRequest = errors.New("stepd: unrecognized request")

func (s *Step) handle(req stepapi.Request, w *stepapi.Wire, c io.Writer, p peer) error {
	var o stepapi.Out
	switch req {
	case stepapi.RequestSignalContainer:
		sig, err := w.ReadInt32()
		if err != nil {
			return err
		}
		flags, err := w.ReadInt32()
		if err != nil {
			return err
		}
		details, err := w.ReadLenBytes()
		if err != nil {
			return err
		}
		reqUID, err := w.ReadUint32()
		if err != nil {
			return err
		}
		rc, errnum := s.handleSignal(int(sig), int(flags), string(details), reqUID, p.uid)
		o.Int32(rc)
		o.Int32(errnum)
	case stepapi.RequestState:
		o.Int32(int32(s.State()))
	case stepapi.RequestStepMemLimits:
		o.Uint64(s.jobMemMiB)
		o.Uint64(s.stepMemMiB)
	case stepapi.RequestStepUID:
		o.Uint32(s.uid)
	case stepapi.RequestStepNodeID:
		o.Uint32(uint32(s.nodeID)) // 0 for the batch script
	case stepapi.RequestAttach:
		return s.handleAttach(w, c, p)
	case stepapi.RequestPidInContainer:
		pid, err := w.ReadInt32()
		if err != nil {
			return err
		}
		o.Bool(s.hasPID(int(pid)))
	case stepapi.RequestDaemonPID:
		o.Int32(int32(os.Getpid()))
	case stepapi.RequestStepSuspend, stepapi.RequestStepResume:
		if _, err := w.ReadUint16(); err != nil {
			return err
		}
		op := suspend.OpResume
		if req == stepapi.RequestStepSuspend {
			op = suspend.OpSuspend
		}
		rc, errnum := s.handleSuspend(op, p.uid)
		o.Int32(rc)
		o.Int32(errnum)
	case stepapi.RequestStepTerminate:
		rc, errnum := s.handleTerminate(p.uid)
		o.Int32(rc)
		o.Int32(errnum)
	case stepapi.RequestStepCompletion:
		return s.handleCompletion(w, c, p)
	case stepapi.RequestStepTaskInfo:
		s.mu.Lock()
		if s.launch != nil || s.prolog != nil {
			o.Uint32(uint32(len(s.tasks)))
			for _, t := range s.tasks {
				o.Int32(int32(t.ltid))
				o.Uint32(t.gtid)
				o.Int32(int32(t.pid))
				o.Bool(t.exited)
				o.Int32(t.status)
			}
		} else {
			o.Uint32(1)
			o.Int32(0)            // local id
			o.Uint32(0)           // global id
			o.Int32(int32(s.pid)) // pid
			o.Bool(s.exited)      // exited
			o.Int32(s.estatus)    // raw status
		}
		s.mu.Unlock()
	case stepapi.RequestStepStat:
		if p.uid != s.uid && !s.authorized(p.uid) {
			return fmt.Errorf("stepd: stat from uid %d", p.uid)
		}
		// jobacct_gather/none: no accounting buffer, no task counted;
		// the extern step always counts its one task (_handle_stat_jobacct).
		if s.prolog != nil {
			o.Int32(1)
		} else {
			o.Int32(0)
		}
	case stepapi.RequestStepListPIDs:
		pids := s.containerPIDs()
		o.Uint32(uint32(len(pids)))
		for _, pid := range pids {
			o.Uint32(uint32(pid))
		}
	case stepapi.RequestStepReconfigure:
		if !s.authorized(p.uid) {
			o.Int32(-1)
			o.Int32(int32(syscall.EPERM))
		} else {
			o.Int32(0)
			o.Int32(0)
		}
	case stepapi.RequestJobNotify:
		msg, err := w.ReadLenBytes()
		if err != nil {
			return err
		}
		if p.uid != s.uid && !s.authorized(p.uid) {
			o.Int32(int32(syscall.EPERM))
		} else {
			// scontrol notify: an error line of the step manager's, timestamped
			// from 26.05 as its other lines.
			s.errorLine("%s", strings.TrimRight(string(msg), "\x00"))
			o.Int32(0)
		}
	case stepapi.RequestAddExternPID:
		pid, err := w.ReadInt32()
		if err != nil {
			return err
		}
		if !s.authorized(p.uid) {
			s.log.Error("attempt to add pid to step", "uid", p.uid, "pid", pid)
			o.Int32(-1)
		} else {
			o.Int32(s.addExternPID(int(pid))) // only the extern step adopts pids
		}
	case stepapi.RequestX11Display:
		o.Int32(0) // no X11 forwarding
		o.Int32(0)
	case stepapi.RequestGetPW:
		return s.handleGetPW(w, c, p)
	case stepapi.RequestGetGR:
		return s.handleGetGR(w, c, p)
	case stepapi.RequestGetNSFD:
		// container_g_join_external without a job_container plugin: 0,
		// "no namespace" (-1 made pam_slurm_adopt log stepd_get_ns_fd failed).
		o.Int32(0)
	case stepapi.RequestGetNSFDs:
		// namespace_g_join_external without a namespace plugin: no fds.
		// 26.05's pam_slurm_adopt frees its list twice when this read
		// fails, and then hangs.
		o.Int32(0)
	case stepapi.RequestGetHost:
		if _, err := w.ReadInt32(); err != nil { // mode
			return err
		}
		if _, err := w.ReadLenBytes(); err != nil { // node name
			return err
		}
		o.Int32(0) // not found: host data needs the node table
	default:
		s.log.Error("unrecognized request on step socket", "request", int32(req))
		return errUnknownRequest
	}
	return o.Send(c)
}

// stepIDString is log_build_step_id_str without prefix: "5.0", "5.batch",
// "5.0+1" for a het component.
func stepIDString(id slurmproto.StepID) string {
	var st string
	switch id.StepID {
	case slurmproto.StepIDBatch:
		st = "batch"
	case slurmproto.StepIDExtern:
		st = "extern"
	case slurmproto.StepIDInteractive:
		st = "interactive"
	default:
		st = strconv.FormatUint(uint64(id.StepID), 10)
	}
	s := fmt.Sprintf("%d.%s", id.JobID, st)
	if id.StepHetComp != slurmproto.NoVal {
		s += fmt.Sprintf("+%d", id.StepHetComp)
	}
	return s
}

// cancelTime is slurm_make_time_str's default format, local time.
func cancelTime(t time.Time) string { return t.Format("2006-01-02T15:04:05") }

// handleSignal is _handle_signal_container for the batch step.
func (s *Step) handleSignal(sig, flags int, details string, reqUID, uid uint32) (rc, errnum int32) {
	s.log.Debug("signal container", "signal", sig, "flags", flags, "req_uid", reqUID, "uid", uid)
	if uid != s.uid && !s.authorized(uid) {
		s.log.Error("signal container request from unauthorized uid", "uid", reqUID, "owner", s.uid)
		return -1, int32(syscall.EPERM)
	}
	if e := s.waitRunning(); e != 0 {
		return -1, int32(e)
	}
	s.mu.Lock()
	if (sig == int(syscall.SIGTERM) || sig == int(syscall.SIGKILL)) && !s.exited {
		s.killedByCmd = true
		for _, t := range s.tasks {
			if !t.exited {
				t.killedByCmd = true
			}
		}
	}
	// Only the step's first node writes the cancel line.
	write := !s.msgSent && s.state < stepapi.StateEnding && s.nodeID == 0
	if write && cancelLineOnce(sig) {
		// Claimed here, not after the line: slurmctld's signal and
		// terminate requests for one scancel arrive at once, and both
		// wrote the line (TestSrun/DebuggerTest/Scancel, 26.05).
		s.msgSent = true
	}
	s.mu.Unlock()
	if write {
		entity := fmt.Sprintf("JOB %d", s.id.JobID)
		if s.launch != nil {
			entity = "STEP " + stepIDString(s.id)
		}
		node := s.spec.NodeName
		now := cancelTime(time.Now())
		switch uint16(sig) {
		case slurmproto.SigTimeLimit:
			s.errorLine("*** %s ON %s CANCELLED AT %s DUE TO TIME LIMIT ***", entity, node, now)
		case slurmproto.SigPreempted:
			s.errorLine("*** %s ON %s CANCELLED AT %s DUE TO PREEMPTION ***", entity, node, now)
		case slurmproto.SigNodeFail:
			s.errorLine("*** %s ON %s CANCELLED AT %s DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", entity, node, now)
		case slurmproto.SigRequeued:
			s.errorLine("*** %s ON %s CANCELLED AT %s DUE TO JOB REQUEUE ***", entity, node, now)
		case slurmproto.SigFailure:
			s.errorLine("*** %s ON %s FAILED (non-zero exit code or other failure mode) ***", entity, node)
		case slurmproto.SigUME:
			if s.spec.ProtocolVersion < slurmproto.Version2605 { // 26.05 dropped SIG_UME's line
				s.errorLine("*** %s ON %s UNCORRECTABLE MEMORY ERROR AT %s ***", entity, node, now)
			}
		case uint16(syscall.SIGTERM), uint16(syscall.SIGKILL):
			if s.spec.ProtocolVersion >= slurmproto.Version2605 {
				s.errorLine("*** %s ON %s CANCELLED AT %s DUE to SIGNAL %s ***", entity, node, now, strsignal(syscall.Signal(sig)))
			} else {
				s.errorLine("*** %s ON %s CANCELLED AT %s ***", entity, node, now)
			}
		case slurmproto.SigTermKill:
			if s.spec.ProtocolVersion >= slurmproto.Version2605 {
				s.errorLine("*** %s ON %s CANCELLED AT %s DUE TO TASK FAILURE ***", entity, node, now)
			} else {
				s.errorLine("*** %s ON %s CANCELLED AT %s ***", entity, node, now)
			}
		}
		if details != "" {
			s.errorLine("*** REASON: %s ***", details)
		}
	}
	switch uint16(sig) {
	case slurmproto.SigTimeLimit, slurmproto.SigNodeFail, slurmproto.SigPreempted,
		slurmproto.SigFailure, slurmproto.SigRequeued, slurmproto.SigUME:
		return 0, 0
	}
	if sig == int(slurmproto.SigAbort) {
		sig = int(syscall.SIGKILL)
		s.mu.Lock()
		s.aborted = true
		s.mu.Unlock()
	}
	suspended := s.isSuspended()
	s.mu.Lock()
	pgid := s.pid
	s.mu.Unlock()
	if suspended && sig != int(syscall.SIGKILL) {
		return -1, slurmproto.ESlurmdStepSuspended
	}
	if sig == int(slurmproto.SigDebugWake) {
		// srun's MPIR_Breakpoint: the debugger has what it needs, the
		// tasks stopped at exec may run (a no-op for other steps, as stock).
		if s.parallelDebug() {
			for _, pid := range s.taskPIDs() {
				s.wakeProcess(pid)
			}
		}
		return 0, 0
	}
	if sig == int(slurmproto.SigTermKill) {
		_ = s.signalContainer(syscall.SIGCONT)
		_ = s.signalContainer(syscall.SIGTERM)
		time.Sleep(s.spec.KillWait)
		sig = int(syscall.SIGKILL)
	}
	// Only the batch step signals its script's process (group); another
	// step's pid may be 0 (a 26.05 extern step holds no process), and
	// kill(0) would hit the step manager itself.
	if s.id.StepID == slurmproto.StepIDBatch && pgid > 0 && flags&int(slurmproto.KillJobBatch|slurmproto.KillFullJob) != 0 {
		var err error
		if flags&int(slurmproto.KillFullJob) != 0 {
			err = syscall.Kill(-pgid, syscall.Signal(sig))
		} else {
			err = syscall.Kill(pgid, syscall.Signal(sig))
		}
		if err != nil {
			s.log.Error("failed to signal batch script", "signal", sig, "pid", pgid, "error", err)
			return -1, int32(errnoOf(err))
		}
		s.log.Debug("sent signal to batch script", "signal", sig, "pid", pgid)
		return 0, 0
	}
	if err := s.signalContainer(syscall.Signal(sig)); err != nil {
		return -1, int32(errnoOf(err))
	}
	return 0, 0
}

// cancelLineOnce: the signals whose cancel line a step writes once
// (req.c msg_sent); SIG_UME's line and other signals do not count.
func cancelLineOnce(sig int) bool {
	switch uint16(sig) {
	case slurmproto.SigTimeLimit, slurmproto.SigPreempted, slurmproto.SigNodeFail, slurmproto.SigRequeued,
		slurmproto.SigFailure, uint16(syscall.SIGTERM), uint16(syscall.SIGKILL), slurmproto.SigTermKill:
		return true
	}
	return false
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// handleTerminate is _handle_terminate: SIGKILL to every process.
func (s *Step) handleTerminate(uid uint32) (int32, int32) {
	if uid != s.uid && !s.authorized(uid) {
		return -1, int32(syscall.EPERM)
	}
	if e := s.waitRunning(); e != 0 {
		return -1, int32(e)
	}
	s.mu.Lock()
	if !s.exited {
		s.killedByCmd = true
	}
	s.mu.Unlock()
	s.clearSuspend()
	if err := s.signalContainer(syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return -1, int32(errnoOf(err))
	}
	return 0, 0
}

// handleAttach is _handle_attach: sattach's I/O connection joins the
// step's clients and its response address gets the task exits. A batch
// step has no I/O to attach to.
func (s *Step) handleAttach(w *stepapi.Wire, c io.Writer, p peer) error {
	addrs, err := w.ReadBytes(2 * stepapi.SockaddrStorageSize)
	if err != nil {
		return err
	}
	key, err := w.ReadLenBytes() // the client's credential signature
	if err != nil {
		return err
	}
	if _, err := w.ReadUint32(); err != nil { // uid
		return err
	}
	if _, err := w.ReadUint16(); err != nil { // protocol version
		return err
	}
	var o stepapi.Out
	switch {
	case s.State() != stepapi.StateRunning:
		o.Int32(slurmproto.ESlurmdJobNotRunning)
		return o.Send(c)
	case !s.authorized(p.uid) && p.uid != s.uid:
		o.Int32(int32(syscall.EPERM))
		return o.Send(c)
	case s.launch == nil || s.sio == nil:
		o.Int32(-1)
		return o.Send(c)
	}
	ioAddr, ok1 := stepapi.ParseSockaddrIn(addrs[:stepapi.SockaddrStorageSize])
	respAddr, ok2 := stepapi.ParseSockaddrIn(addrs[stepapi.SockaddrStorageSize:])
	if ok1 && ioAddr.Port() != 0 {
		if err := s.sio.attach(s, ioAddr.String(), key); err != nil {
			s.log.Error("attach io", "addr", ioAddr, "error", err)
			o.Int32(int32(slurmproto.ESlurmdIOError))
			return o.Send(c)
		}
	}
	s.mu.Lock()
	if ok2 && respAddr.Port() != 0 {
		s.attachedResp = append(s.attachedResp, respAddr.String())
	}
	o.Int32(0)
	o.Uint32(uint32(len(s.tasks)))
	for _, t := range s.tasks {
		o.Uint32(uint32(t.pid))
	}
	for _, t := range s.tasks {
		o.Uint32(t.gtid)
	}
	for _, t := range s.tasks {
		name := t.argv0 + "\x00"
		o.Int32(int32(len(name)))
		o.Bytes([]byte(name))
	}
	s.mu.Unlock()
	return o.Send(c)
}

// handleCompletion reads a REQUEST_STEP_COMPLETION: a batch step has no
// children in a step tree, so it answers as stock does when not waiting
// for any.
func (s *Step) handleCompletion(w *stepapi.Wire, c io.Writer, p peer) error {
	var o stepapi.Out
	if !s.authorized(p.uid) {
		o.Int32(-1)
		o.Int32(int32(syscall.EPERM))
		_ = o.Send(c)
		return fmt.Errorf("stepd: step completion from uid %d", p.uid)
	}
	for range 3 { // first, last, step_rc
		if _, err := w.ReadInt32(); err != nil {
			return err
		}
	}
	if _, err := w.ReadLenBytes(); err != nil { // jobacct
		return err
	}
	o.Int32(-1)
	o.Int32(int32(syscall.ETIMEDOUT))
	return o.Send(c)
}

// handleGetPW is _handle_getpw (nss_slurm), answered from the credential.
func (s *Step) handleGetPW(w *stepapi.Wire, c io.Writer, p peer) error {
	mode, err := w.ReadInt32()
	if err != nil {
		return err
	}
	uid, err := w.ReadUint32()
	if err != nil {
		return err
	}
	name, err := w.ReadLenBytes()
	if err != nil {
		return err
	}
	pidMatch := s.hasPID(int(p.pid))
	userMatch := uid == s.uid || string(name) == s.userName
	found := false
	switch mode {
	case stepapi.GetPWMatchUserAndPID:
		found = userMatch && pidMatch
	case stepapi.GetPWMatchPID:
		found = pidMatch
	case stepapi.GetPWMatchAlways:
		found = true
	}
	// The credential's passwd fields (C checks for NULL, not empty).
	if s.userName == "" || s.pwGecos == "" || s.pwDir == "" || s.pwShell == "" {
		found = false
	}
	var o stepapi.Out
	if !found {
		o.Int32(0)
		return o.Send(c)
	}
	o.Int32(1)
	o.LenString(s.userName)
	o.LenString("x")
	o.Uint32(s.uid)
	o.Uint32(s.gid)
	o.LenString(s.pwGecos)
	o.LenString(s.pwDir)
	o.LenString(s.pwShell)
	return o.Send(c)
}

// handleGetGR is _handle_getgr (nss_slurm); like 22.05, the group-and-pid
// mode does not check the pid.
func (s *Step) handleGetGR(w *stepapi.Wire, c io.Writer, p peer) error {
	mode, err := w.ReadInt32()
	if err != nil {
		return err
	}
	gid, err := w.ReadUint32()
	if err != nil {
		return err
	}
	name, err := w.ReadLenBytes()
	if err != nil {
		return err
	}
	var o stepapi.Out
	if len(s.gids) == 0 || len(s.grNames) != len(s.gids) {
		o.Int32(0)
		return o.Send(c)
	}
	one := func(i int) {
		o.LenString(slurmproto.CString(s.grNames[i]))
		o.LenString("x")
		o.Uint32(s.gids[i])
		o.LenString(s.userName)
	}
	switch mode {
	case stepapi.GetPWMatchUserAndPID:
		for i, g := range s.gids {
			if g == gid || string(name) == slurmproto.CString(s.grNames[i]) {
				o.Int32(1)
				one(i)
				return o.Send(c)
			}
		}
		o.Int32(0)
	case stepapi.GetPWMatchPID, stepapi.GetPWMatchAlways:
		if mode == stepapi.GetPWMatchPID && !s.hasPID(int(p.pid)) {
			o.Int32(0)
			break
		}
		o.Int32(int32(len(s.gids)))
		for i := range s.gids {
			one(i)
		}
	default:
		o.Int32(0)
	}
	return o.Send(c)
}
