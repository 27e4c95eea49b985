package spawn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
)

// portAttempts bounds the random draws of FreePorts.
const portAttempts = 400

// FreePorts returns n distinct TCP ports in [low, high) that were free a
// moment ago (all held open together while drawing, so none repeats).
// Callers choose ranges below the kernel's ephemeral range so clients do
// not take them meanwhile.
func FreePorts(n, low, high int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for try := 0; len(ports) < n && try < portAttempts; try++ {
		p := low + rand.IntN(high-low)
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
	return ports, nil
}
