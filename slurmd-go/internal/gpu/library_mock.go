//go:build linux && cgo && nvmlmock

package gpu

import (
	"bufio"
	"os"
	"syscall"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/gpu/gpumock"
)

// newLibrary, in the nvmlmock build only, is go-nvml's dgxh100 mock: 8 x
// H100 80GB HBM3, their CPU affinity the host's first and last socket.
func newLibrary(o Options) nvml.Interface {
	// Said on stderr (the daemon's .out) unless a logger is given: nobody
	// should mistake this binary for the production one.
	log := o.Logger
	if log == nil {
		log = hclog.New(&hclog.LoggerOptions{Output: os.Stderr})
	}
	log = log.Named("gpu.nvmlmock")
	mo := gpumock.Options{}
	// GPUs 0-3 local to the first socket, 4-7 to the last, as on a DGX:
	// whole sockets, since slurmctld (24.11 on) refuses a GPU whose cores
	// split one.
	if cm, err := ReadCPUMap(o.SysRoot); err == nil && len(cm.Sockets()) > 0 {
		sk := cm.Sockets()
		mo.SocketCPUs = [][]int{sk[0], sk[len(sk)-1]}
	}
	m := gpumock.NewDGXH100(mo)
	log.Warn("NVML is a mock: 8 x H100 from go-nvml's dgxh100 (nvmlmock build, not for production)")
	if p := os.Getenv(MockControlEnv); p != "" {
		go mockControl(m, p, log)
	}
	return m
}

func mockControl(m *gpumock.Machine, path string, log hclog.Logger) {
	if err := syscall.Mkfifo(path, 0o600); err != nil && !os.IsExist(err) {
		log.Warn("mock control FIFO", "path", path, "error", err)
		return
	}
	for {
		f, err := os.Open(path) // blocks until a writer opens it
		if err != nil {
			log.Warn("mock control FIFO", "path", path, "error", err)
			return
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if err := m.Command(sc.Text()); err != nil {
				log.Warn("mock control", "error", err)
				continue
			}
			log.Info("mock control", "command", sc.Text())
		}
		f.Close()
	}
}
