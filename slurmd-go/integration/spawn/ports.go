package spawn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
)

// portAttempts bounds the random draws of FreePorts.
const portAttempts = 400

// FreePorts returns n distinct TCP ports in [low, high) that were free a
// moment ago (all held open together while drawing, so none repeats).
// Callers choose ranges below the kernel's ephemeral range so clients do
// not take them meanwhile. A port is handed out once per process: a
// cluster's daemon that is down for a restart leaves its port free, and
// another cluster started meanwhile must not draw it.
func FreePorts(n, low, high int) ([]int, error) {
	handedMu.Lock()
	defer handedMu.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for try := 0; len(ports) < n && try < portAttempts; try++ {
		p := low + rand.IntN(high-low)
		if handed[p] {
			continue
		}
		l, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", p))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, errors.New("spawn: not enough free ports")
	}
	for _, p := range ports {
		handed[p] = true
	}
	return ports, nil
}

// handed are the ports FreePorts has returned in this process.
var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)
