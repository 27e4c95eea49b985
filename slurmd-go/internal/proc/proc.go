// Package proc holds the process plumbing of the step manager: signals and
// process-tree kills, /proc scans, the child reaper, rlimits, oom_score_adj
// and doing file work with a user's credentials. It imports only the
// standard library and golang.org/x/sys.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Stat is the part of /proc/<pid>/stat the step manager needs.
type Stat struct {
	PID, PPID, PGID, SID int
	State                byte
}

// ReadStat parses /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(pid, b)
}

func parseStat(pid int, b []byte) (Stat, error) {
	// comm may contain spaces and parentheses: fields resume after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return Stat{}, fmt.Errorf("proc: malformed stat of %d", pid)
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 4 {
		return Stat{}, fmt.Errorf("proc: malformed stat of %d", pid)
	}
	s := Stat{PID: pid, State: f[0][0]}
	var err1, err2, err3 error
	s.PPID, err1 = strconv.Atoi(string(f[1]))
	s.PGID, err2 = strconv.Atoi(string(f[2]))
	s.SID, err3 = strconv.Atoi(string(f[3]))
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, fmt.Errorf("proc: stat of %d: %w", pid, err)
	}
	return s, nil
}

// All returns the stat of every process (those that vanish meanwhile are
// skipped).
func All() ([]Stat, error) {
	pids, err := PIDs()
	if err != nil {
		return nil, err
	}
	out := make([]Stat, 0, len(pids))
	for _, pid := range pids {
		if s, err := ReadStat(pid); err == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// PIDs lists the processes in /proc, in its order.
func PIDs() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Tree returns the pids in session sid or process group pgid, plus every
// descendant of root (by parent links) — what a job that did not escape
// through a double fork to init still holds. Zombies are included.
func Tree(root, sid, pgid int) ([]int, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, s := range all {
		children[s.PPID] = append(children[s.PPID], s.PID)
	}
	seen := map[int]bool{}
	var out []int
	add := func(p int) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, s := range all {
		if (sid > 0 && s.SID == sid) || (pgid > 0 && s.PGID == pgid) {
			add(s.PID)
		}
	}
	if root > 0 {
		stack := []int{root}
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if _, err := os.Stat("/proc/" + strconv.Itoa(p)); err == nil {
				add(p)
			}
			stack = append(stack, children[p]...)
		}
	}
	return out, nil
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	s, err := ReadStat(pid)
	return err == nil && s.State != 'Z' && s.State != 'X'
}

// Signal sends sig to each pid, skipping self; ESRCH is not an error. It
// returns the first other error.
func Signal(pids []int, sig syscall.Signal) error {
	self := os.Getpid()
	var first error
	for _, p := range pids {
		if p <= 0 || p == self {
			continue
		}
		if err := syscall.Kill(p, sig); err != nil && err != syscall.ESRCH && first == nil {
			first = fmt.Errorf("proc: kill %d %v: %w", p, sig, err)
		}
	}
	return first
}

// KillPG sends sig to process group pgid; ESRCH is not an error.
func KillPG(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("proc: refusing to signal process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("proc: killpg %d %v: %w", pgid, sig, err)
	}
	return nil
}

// SetOOMScoreAdj writes v (-1000..1000) to pid's oom_score_adj (0 = self).
func SetOOMScoreAdj(pid, v int) error {
	p := "self"
	if pid > 0 {
		p = strconv.Itoa(pid)
	}
	return os.WriteFile("/proc/"+p+"/oom_score_adj", []byte(strconv.Itoa(v)), 0)
}
