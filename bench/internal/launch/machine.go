package launch

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine describes where a bench ran.
type Machine struct {
	CPUModel      string            `json:"cpu_model"`
	Cores         int               `json:"cores"`
	MemoryMiB     int64             `json:"memory_mib"`
	Kernel        string            `json:"kernel"`
	GoVersion     string            `json:"go_version"`
	SlurmVersion  string            `json:"slurm_version"`           // `slurmd -V` of the stack's stock slurmd
	MungeVersion  string            `json:"munge_version,omitempty"` // munged -V; "" when the stack has no munged
	SlurmdGoRev   string            `json:"slurmd_go_rev"`
	NofileLimit   uint64            `json:"nofile_limit"`
	Sysctl        map[string]string `json:"sysctl"`
	Date          string            `json:"date"`
	Virtualized   string            `json:"virtualized,omitempty"`
	LoadAvgBefore string            `json:"loadavg_before"`
}

// DescribeMachine reads the machine's description for a bench of stack. repo is the
// repository root (for the git revision of slurmd-go).
func DescribeMachine(repo string, stack Stack) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Sysctl: map[string]string{},
		Date: time.Now().UTC().Format(time.RFC3339)}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				f := strings.Fields(l)
				if len(f) >= 2 {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					m.MemoryMiB = kb / 1024
				}
			}
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = cstr(u.Sysname[:]) + " " + cstr(u.Release[:]) + " " + cstr(u.Machine[:])
	}
	m.SlurmVersion = StockVersion(stack)
	if stack.UsesMunged() {
		m.MungeVersion = firstLine(exec.Command(Munged, "-V").CombinedOutput())
	}
	rev := firstLine(exec.Command("git", "-C", repo, "rev-parse", "--short=12", "HEAD").Output())
	if st, err := exec.Command("git", "-C", repo, "status", "--porcelain", "--", "slurmd-go").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		rev += " (slurmd-go/ has uncommitted changes)"
	}
	m.SlurmdGoRev = rev
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		m.NofileLimit = rl.Cur
	}
	for _, k := range []string{"net/core/somaxconn", "net/ipv4/tcp_tw_reuse", "net/ipv4/ip_local_port_range",
		"net/ipv4/tcp_max_syn_backlog", "net/ipv4/tcp_syncookies"} {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			m.Sysctl[strings.ReplaceAll(k, "/", ".")] = strings.Join(strings.Fields(string(b)), " ")
		}
	}
	m.Virtualized = firstLine(exec.Command("systemd-detect-virt").Output())
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvgBefore = strings.TrimSpace(string(b))
	}
	return m
}

// StockVersion is `slurmd -V` of the stack's stock slurmd ("slurm-wlm 24.11.5"), run in its
// chroot for a newer release; "" if it cannot run.
func StockVersion(stack Stack) string {
	argv := []string{StockSlurmd, "-V"}
	if root := stack.Root(); root != "" {
		argv = append([]string{"chroot", root}, argv...)
	}
	return firstLine(exec.Command(argv[0], argv[1:]...).Output())
}

func cstr(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

func firstLine(b []byte, err error) string {
	if err != nil && len(b) == 0 {
		return ""
	}
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(l)
}
