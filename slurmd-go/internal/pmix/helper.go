package pmix

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Named timeouts of the helper's life.
const (
	// helperStartTimeout bounds server init, registration and setup_fork.
	helperStartTimeout = 60 * time.Second
	// helperQuitTimeout is how long a helper told to quit may take before it is killed.
	helperQuitTimeout = 5 * time.Second
)

// events is what the helper's frames become once it is serving.
type events interface {
	fence(m fenceMsg)
	modexRequest(id, rank uint32)
	modexServed(id uint32, status int32, data []byte)
	abort(status int32, rank uint32, msg string)
}

// helper is one slurmd-go-pmix process and its end of the socketpair.
type helper struct {
	log  hclog.Logger
	cmd  *exec.Cmd
	conn *os.File
	wmu  sync.Mutex // guards writes on conn
	r    *bufio.Reader
	done chan struct{} // closed once the process is reaped
	werr error         // the process's exit, set before done closes
}

// startHelper starts path with the credential and environment given, its
// end of a socketpair at fd 3, and logs its stderr. The helper leaves when
// its end of the socketpair closes, so a step manager that dies takes it
// along.
func startHelper(path string, cred *syscall.Credential, env []string, log hclog.Logger) (*helper, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pmix: socketpair: %w", err)
	}
	// Our end non-blocking, so that Go's poller serves it and read deadlines
	// bound setup; the helper's end is a file description of its own.
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, fmt.Errorf("pmix: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "pmix-helper"), os.NewFile(uintptr(fds[1]), "pmix-helper-child")
	defer theirs.Close()
	cmd := exec.Command(path)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("pmix: helper stderr: %w", err)
	}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("pmix: start helper %s: %w", path, err)
	}
	h := &helper{log: log, cmd: cmd, conn: ours, r: bufio.NewReader(ours), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			log.Info("helper", "line", sc.Text())
		}
		h.werr = cmd.Wait()
		close(h.done)
	}()
	return h, nil
}

func (h *helper) send(typ byte, parts ...[]byte) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if err := writeFrame(h.conn, typ, parts...); err != nil {
		return fmt.Errorf("pmix: write to helper: %w", err)
	}
	return nil
}

// setup sends the job and reads one environment per local rank until the
// helper is ready. Bounded by ctx and helperStartTimeout.
func (h *helper) setup(ctx context.Context, job *Job) (map[uint32][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, helperStartTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { h.conn.SetReadDeadline(time.Now()) })
	defer stop()
	if err := h.send(msgJob, job.encode()); err != nil {
		return nil, err
	}
	local := map[uint32]bool{}
	for _, r := range job.LocalRanks() {
		local[r] = true
	}
	envs := map[uint32][]string{}
	for {
		f, err := readFrame(h.r)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("pmix: helper not ready after %s: %w", helperStartTimeout, ctx.Err())
			}
			return nil, h.exitErr(fmt.Errorf("pmix: helper setup: %w", noEOF(err)))
		}
		switch f.typ {
		case msgEnv:
			if len(f.payload) < 4 {
				return nil, fmt.Errorf("%w: environment frame of %d bytes", ErrProtocol, len(f.payload))
			}
			rank := binary.BigEndian.Uint32(f.payload)
			if !local[rank] || envs[rank] != nil {
				return nil, fmt.Errorf("%w: environment for rank %d, not a local rank still waiting", ErrProtocol, rank)
			}
			env, err := cstrings(f.payload[4:])
			if err != nil {
				return nil, err
			}
			envs[rank] = append([]string{}, env...)
		case msgReady:
			if len(envs) != len(local) {
				return nil, fmt.Errorf("%w: helper ready with %d of %d task environments", ErrProtocol, len(envs), len(local))
			}
			h.conn.SetReadDeadline(time.Time{})
			return envs, nil
		case msgError:
			return nil, fmt.Errorf("pmix: helper failed: %s", f.payload)
		default:
			return nil, fmt.Errorf("%w: frame '%c' during setup", ErrProtocol, f.typ)
		}
	}
}

// exitErr adds the helper's exit status to err once it has been reaped.
func (h *helper) exitErr(err error) error {
	select {
	case <-h.done:
		if h.werr != nil {
			return fmt.Errorf("%w (helper %w)", err, h.werr)
		}
	case <-time.After(time.Second):
	}
	return err
}

// serve reads the helper's frames until it closes or breaks the protocol;
// it returns nil after a clean end (EOF after quit).
func (h *helper) serve(ev events) error {
	for {
		f, err := readFrame(h.r)
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pmix: helper: %w", err)
		}
		switch f.typ {
		case msgFence:
			m, err := parseFence(f)
			if err != nil {
				return err
			}
			ev.fence(m)
		case msgModexReq:
			if len(f.payload) != 8 {
				return fmt.Errorf("%w: modex request of %d bytes", ErrProtocol, len(f.payload))
			}
			ev.modexRequest(binary.BigEndian.Uint32(f.payload), binary.BigEndian.Uint32(f.payload[4:]))
		case msgModexAnswer:
			id, st, data, err := idStatus(f)
			if err != nil {
				return err
			}
			ev.modexServed(id, st, data)
		case msgAbort:
			if len(f.payload) < 8 {
				return fmt.Errorf("%w: abort frame of %d bytes", ErrProtocol, len(f.payload))
			}
			ev.abort(int32(binary.BigEndian.Uint32(f.payload)), binary.BigEndian.Uint32(f.payload[4:]), string(f.payload[8:]))
		case msgError:
			return fmt.Errorf("pmix: helper failed: %s", f.payload)
		default:
			return fmt.Errorf("%w: unexpected frame '%c'", ErrProtocol, f.typ)
		}
	}
}

func (h *helper) fenceResult(id uint32, status int32, data []byte) error {
	return h.send(msgFenceResult, u32(id), u32(uint32(status)), data)
}

func (h *helper) modexReply(id uint32, status int32, data []byte) error {
	return h.send(msgModexReply, u32(id), u32(uint32(status)), data)
}

func (h *helper) modexServe(id, rank uint32) error {
	return h.send(msgModexServe, u32(id), u32(rank))
}

// close tells the helper to quit, kills it after helperQuitTimeout and
// waits for it.
func (h *helper) close() {
	if err := h.send(msgQuit); err != nil {
		h.log.Debug("quit not delivered", "error", err)
	}
	select {
	case <-h.done:
	case <-time.After(helperQuitTimeout):
		h.log.Warn("helper did not quit: killed", "pid", h.cmd.Process.Pid)
		h.cmd.Process.Kill()
		<-h.done
	}
	h.conn.Close()
}
