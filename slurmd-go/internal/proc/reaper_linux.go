package proc

import (
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// SetChildSubreaper makes orphaned descendants of this process re-parent
// to it instead of init (PR_SET_CHILD_SUBREAPER), so a job's double-forked
// processes stay visible and get reaped by the Reaper.
func SetChildSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// Exit is one reaped child.
type Exit struct {
	PID    int
	Status syscall.WaitStatus // raw wait status, as wait3() gives it
	Rusage syscall.Rusage
}

// Reaper reaps every child of the process (wait4(-1) on SIGCHLD) and hands
// the exit of each child started with Start to its channel; orphans that
// re-parented to us (see SetChildSubreaper) are reaped and forgotten. A
// process using a Reaper must start all its children through Start and
// never call Wait on them. Methods are safe for concurrent use.
type Reaper struct {
	mu       sync.Mutex
	watchers map[int]chan Exit // guarded by mu
	stops    map[int]chan Exit // guarded by mu; see StartTraced
	sigs     chan os.Signal
	done     chan struct{}
}

// NewReaper starts reaping.
func NewReaper() *Reaper {
	r := &Reaper{
		watchers: map[int]chan Exit{},
		stops:    map[int]chan Exit{},
		sigs:     make(chan os.Signal, 16),
		done:     make(chan struct{}),
	}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	go r.loop()
	return r
}

// Start starts cmd and returns a channel that receives its exit once.
// The lock is held from before the fork until the pid is registered, so an
// exit reaped in between is still delivered. cmd.Wait must not be called.
func (r *Reaper) Start(cmd *exec.Cmd) (<-chan Exit, error) {
	ch := make(chan Exit, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r.watchers[cmd.Process.Pid] = ch
	return ch, nil
}

// StartTraced is Start for a child that traces itself (PTRACE_TRACEME):
// the second channel receives its stops until it exits. wait4 reports a
// tracee's stops to its tracer even without WUNTRACED, and those of its
// threads (Exit.PID is then the thread's id). A stop is never an exit: the
// child's exit still comes on the first channel. The stop channel is
// registered with the exit one, under the lock held across the fork, so a
// stop reaped at once (a child that execs straight away stops there) is
// not dropped as one nobody asked for.
func (r *Reaper) StartTraced(cmd *exec.Cmd) (<-chan Exit, <-chan Exit, error) {
	ch := make(chan Exit, 1)
	stops := make(chan Exit, stopBacklog)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	r.watchers[cmd.Process.Pid] = ch
	r.stops[cmd.Process.Pid] = stops
	return ch, stops, nil
}

// stopBacklog is how many stops of one child wait for its tracer; more
// are dropped (a tracer handles each before the tracee can stop again).
const stopBacklog = 16

// threadGroup is the process id (Tgid) of thread tid, or tid.
func threadGroup(tid int) int {
	if n, err := StatusInt(tid, "Tgid"); err == nil {
		return n
	}
	return tid
}

// Stop ends reaping (children exiting later stay zombies until exit).
func (r *Reaper) Stop() {
	signal.Stop(r.sigs)
	close(r.done)
}

func (r *Reaper) loop() {
	for {
		r.reapAll()
		select {
		case <-r.sigs:
		case <-r.done:
			return
		}
	}
}

func (r *Reaper) reapAll() {
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		// No __WALL: since Linux 4.7 wait4 assumes it for tracees, whose
		// threads' stops StartTraced hands out.
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, &ru)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		e := Exit{PID: pid, Status: ws, Rusage: ru}
		if ws.Stopped() {
			r.mu.Lock()
			ch, ok := r.stops[pid]
			r.mu.Unlock()
			if !ok {
				// A thread of a tracee: /proc is read without the lock,
				// which Start holds across a fork.
				tgid := threadGroup(pid)
				r.mu.Lock()
				ch, ok = r.stops[tgid]
				r.mu.Unlock()
			}
			if ok {
				select {
				case ch <- e:
				default:
				}
			}
			continue
		}
		r.mu.Lock()
		delete(r.stops, pid)
		if ch, ok := r.watchers[pid]; ok {
			delete(r.watchers, pid)
			ch <- e
		}
		r.mu.Unlock()
	}
}
