// Package procstat samples a process's resident memory, threads, open descriptors and CPU
// time from /proc (Linux only), often enough to catch short peaks.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DefaultInterval is the sampling period: short enough to see a burst of threads or memory
// during a 2-second run, cheap enough (three small /proc reads) not to load the machine.
const DefaultInterval = 50 * time.Millisecond

var (
	pageSize  = int64(os.Getpagesize())
	clockTick = 100.0 // USER_HZ; 100 on every Linux ABI Go supports
)

// Snapshot is one reading of a process.
type Snapshot struct {
	RSSKB   int64
	Threads int
	FDs     int
	CPU     time.Duration // utime + stime, all threads
}

// Read takes one snapshot of pid.
func Read(pid int) (Snapshot, error) {
	var s Snapshot
	statm, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return s, err
	}
	f := bytes.Fields(statm)
	if len(f) < 2 {
		return s, fmt.Errorf("procstat: short statm of %d", pid)
	}
	res, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return s, fmt.Errorf("procstat: statm of %d: %w", pid, err)
	}
	s.RSSKB = res * pageSize / 1024
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the parenthesised command name (which may hold spaces).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("procstat: bad stat of %d", pid)
	}
	rest := bytes.Fields(stat[i+1:])
	// rest[0] is field 3 (state): utime is field 14, stime 15, num_threads 20.
	if len(rest) < 18 {
		return s, fmt.Errorf("procstat: short stat of %d", pid)
	}
	ut, _ := strconv.ParseInt(string(rest[11]), 10, 64)
	st, _ := strconv.ParseInt(string(rest[12]), 10, 64)
	s.CPU = time.Duration(float64(ut+st) / clockTick * float64(time.Second))
	s.Threads, _ = strconv.Atoi(string(rest[17]))
	s.FDs, err = countFDs(pid)
	return s, err
}

// CPU returns the CPU time pid has used so far (0 if it cannot be read).
func CPU(pid int) time.Duration {
	s, err := Read(pid)
	if err != nil {
		return 0
	}
	return s.CPU
}

// countFDs counts /proc/<pid>/fd entries with getdents, without building names.
func countFDs(pid int) (int, error) {
	fd, err := syscall.Open(fmt.Sprintf("/proc/%d/fd", pid), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	buf := make([]byte, 64<<10)
	n := 0
	for {
		m, err := syscall.Getdents(fd, buf)
		if err != nil {
			return n, err
		}
		if m <= 0 {
			break
		}
		for off := 0; off < m; {
			// struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name.
			reclen := int(buf[off+16]) | int(buf[off+17])<<8
			name := buf[off+19 : off+reclen]
			if !(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) {
				n++
			}
			if reclen == 0 {
				break
			}
			off += reclen
		}
	}
	return n, nil
}

// Series summarises the samples of one process over a period.
type Series struct {
	Samples     int     `json:"samples"`
	IntervalMS  float64 `json:"interval_ms"`
	RSSFirstKB  int64   `json:"rss_first_kb"`
	RSSMedianKB int64   `json:"rss_median_kb"`
	RSSPeakKB   int64   `json:"rss_peak_kb"`
	RSSLastKB   int64   `json:"rss_last_kb"`
	ThreadsPeak int     `json:"threads_peak"`
	ThreadsLast int     `json:"threads_last"`
	FDsPeak     int     `json:"fds_peak"`
	FDsLast     int     `json:"fds_last"`
	CPUSeconds  float64 `json:"cpu_s"` // CPU time used between Start and Stop
	Exited      bool    `json:"exited,omitempty"`
}

// Sampler samples one process periodically until Stop.
type Sampler struct {
	pid      int
	interval time.Duration
	done     chan struct{}
	wg       sync.WaitGroup

	mu     sync.Mutex // guards the fields below
	snaps  []Snapshot // guarded by mu
	last   Snapshot   // guarded by mu
	exited bool       // guarded by mu
	cpu0   time.Duration
}

// Start begins sampling pid every interval (DefaultInterval if 0).
func Start(pid int, interval time.Duration) *Sampler {
	if interval <= 0 {
		interval = DefaultInterval
	}
	s := &Sampler{pid: pid, interval: interval, done: make(chan struct{})}
	first, err := Read(pid)
	if err == nil {
		s.snaps = append(s.snaps, first)
		s.last = first
		s.cpu0 = first.CPU
	}
	s.wg.Add(1)
	go s.loop()
	return s
}

func (s *Sampler) loop() {
	defer s.wg.Done()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			snap, err := Read(s.pid)
			s.mu.Lock()
			if err != nil {
				if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
					s.exited = true
				}
			} else {
				s.snaps = append(s.snaps, snap)
				s.last = snap
			}
			s.mu.Unlock()
		}
	}
}

// Last is the most recent snapshot.
func (s *Sampler) Last() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Mark returns the number of samples taken so far, to summarise a sub-period with Since.
func (s *Sampler) Mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.snaps)
}

// Since summarises the samples taken after mark (see Mark), without stopping.
func (s *Sampler) Since(mark int) Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	if mark > len(s.snaps) {
		mark = len(s.snaps)
	}
	return summarize(s.snaps[mark:], s.interval, s.exited)
}

// Stop ends sampling (taking one last sample) and summarises the whole period.
func (s *Sampler) Stop() Series {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	if snap, err := Read(s.pid); err == nil {
		s.snaps = append(s.snaps, snap)
		s.last = snap
	}
	snaps := s.snaps
	exited := s.exited
	s.mu.Unlock()
	se := summarize(snaps, s.interval, exited)
	if len(snaps) > 0 {
		se.CPUSeconds = (snaps[len(snaps)-1].CPU - s.cpu0).Seconds()
	}
	return se
}

func summarize(snaps []Snapshot, interval time.Duration, exited bool) Series {
	se := Series{Samples: len(snaps), IntervalMS: float64(interval) / float64(time.Millisecond), Exited: exited}
	if len(snaps) == 0 {
		return se
	}
	rss := make([]int64, len(snaps))
	for i, sn := range snaps {
		rss[i] = sn.RSSKB
		se.RSSPeakKB = max(se.RSSPeakKB, sn.RSSKB)
		se.ThreadsPeak = max(se.ThreadsPeak, sn.Threads)
		se.FDsPeak = max(se.FDsPeak, sn.FDs)
	}
	se.RSSFirstKB = snaps[0].RSSKB
	l := snaps[len(snaps)-1]
	se.RSSLastKB, se.ThreadsLast, se.FDsLast = l.RSSKB, l.Threads, l.FDs
	sort.Slice(rss, func(i, j int) bool { return rss[i] < rss[j] })
	se.RSSMedianKB = rss[len(rss)/2]
	return se
}

// Machine is the CPU time all CPUs have spent since boot, from /proc/stat.
type Machine struct {
	Busy  time.Duration // user, nice, system, irq, softirq, steal
	IRQ   time.Duration // irq + softirq (network processing not charged to any process)
	Total time.Duration // busy + idle + iowait
}

// MachineCPU reads the machine's CPU times.
func MachineCPU() (Machine, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return Machine{}, fmt.Errorf("procstat: unexpected /proc/stat")
	}
	var v [8]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(string(f[i+1]), 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	tick := func(n int64) time.Duration { return time.Duration(float64(n) / clockTick * float64(time.Second)) }
	busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return Machine{Busy: tick(busy), IRQ: tick(v[5] + v[6]), Total: tick(busy + v[3] + v[4])}, nil
}

// LoadAvg1 is the machine's 1-minute load average from /proc/loadavg (0 if unreadable).
func LoadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscanf(string(b), "%f", &l)
	return l
}
