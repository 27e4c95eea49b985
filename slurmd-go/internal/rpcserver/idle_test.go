//go:build linux

package rpcserver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	helperAddrEnv = "RPCSERVER_HELPER_ADDR"
	helperNEnv    = "RPCSERVER_HELPER_N"
	idleConns     = 2000
)

// TestHelperIdleClients is not a test: it is the client process of the idle-connection tests
// (clients live in their own process so that the server's memory and descriptors are
// measured alone). It dials N connections, prints "dialed <ok>", prints "closed <n>" once the
// server has closed all of them, and exits when stdin closes.
func TestHelperIdleClients(t *testing.T) {
	addr := os.Getenv(helperAddrEnv)
	if addr == "" {
		return // only meaningful as the subprocess the idle test starts
	}
	n, _ := strconv.Atoi(os.Getenv(helperNEnv))
	raiseNofile(t, n+64)
	var conns []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, testIO)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	fmt.Printf("dialed %d\n", len(conns))
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(io.Discard, c)
		}()
	}
	go func() {
		wg.Wait()
		fmt.Printf("closed %d\n", len(conns))
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// spawnClients starts the helper process dialing n connections to addr.
func spawnClients(t *testing.T, addr string, n int) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperIdleClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperAddrEnv+"="+addr, helperNEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		_ = h.stdin.Close()
		_ = h.cmd.Wait()
	})
	return h
}

// expect reads the helper's next "<word> <n>" line.
func (h *helper) expect(t *testing.T, word string) int {
	t.Helper()
	for h.out.Scan() {
		f := strings.Fields(h.out.Text())
		if len(f) == 2 && f[0] == word {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("helper exited before %q: %v", word, h.out.Err())
	return 0
}

func raiseNofile(t testing.TB, need int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur >= uint64(need) {
		return
	}
	rl.Cur = min(uint64(need), rl.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < uint64(need) {
		t.Fatalf("RLIMIT_NOFILE %d < %d and cannot be raised: %v", rl.Cur, need, err)
	}
}

func liveBytes() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

// TestServer_IdleConnections holds 2,000 idle connections (from a helper process) open while a
// fresh client is served, logs the server's memory per idle connection, and checks that
// ConnTimeout closes them all.
func TestServer_IdleConnections(t *testing.T) {
	raiseNofile(t, idleConns+256)
	forKinds(t, func(t *testing.T, k serverKind) {
		// 5 s: long enough to hold all 2,000 open at once (dialing them takes a while under
		// -race, and seconds on a loaded 2-core machine: 2 s let some expire before the
		// last was accepted), short enough to watch them expire.
		const connTimeout = 5 * time.Second
		s := start(t, k, Config{ConnTimeout: connTimeout}, echo())
		heap0, stack0 := liveBytes()

		h := spawnClients(t, s.Addr().String(), idleConns)
		if n := h.expect(t, "dialed"); n != idleConns {
			t.Fatalf("helper dialed %d of %d", n, idleConns)
		}
		waitFor(t, "all idle connections accepted", func() bool { return s.Stats().Open == idleConns })
		heap1, stack1 := liveBytes()
		if s.Stats().Open != idleConns {
			t.Fatalf("idle connections expired before the measurement; raise connTimeout")
		}
		dh, ds := int64(heap1)-int64(heap0), int64(stack1)-int64(stack0)
		t.Logf("%s: memory per idle connection: %d B (heap %d B + stacks %d B) over %d connections",
			k.name, (dh+ds)/idleConns, dh/idleConns, ds/idleConns, idleConns)

		// A fresh client is answered while the idle ones hold their connections.
		t0 := time.Now()
		got := roundTrip(t, s, []byte("fresh"))
		if !bytes.Equal(got, encode([]byte("fresh"))) {
			t.Fatalf("fresh client got %q", got)
		}
		if d := time.Since(t0); d > testAnswer {
			t.Fatalf("fresh client answered in %v, want < %v", d, testAnswer)
		}

		// ConnTimeout closes every idle connection.
		if n := h.expect(t, "closed"); n != idleConns {
			t.Fatalf("helper saw %d closed", n)
		}
		waitFor(t, "open == 0", func() bool { return s.Stats().Open == 0 })
		if st := s.Stats(); st.Timeouts != idleConns {
			t.Fatalf("Timeouts = %d, want %d (%+v)", st.Timeouts, idleConns, st)
		}
	})
}

// setNofile sets the soft RLIMIT_NOFILE and returns a restore func.
func setNofile(t *testing.T, soft uint64) func() {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	rl := old
	rl.Cur = soft
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	return func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }
}

func openFDs(t *testing.T) uint64 {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("no /proc/self/fd: %v", err)
	}
	return uint64(len(ents))
}

// TestServer_DescriptorExhaustion: gnet v2.9.7 stops its engine when accept(2) fails with
// EMFILE. With the cap disabled the supervisor must restart it; with the derived MaxConns the
// server refuses connections instead of running out of descriptors.
func TestServer_DescriptorExhaustion(t *testing.T) {
	t.Run("gnet_restarts_after_EMFILE", func(t *testing.T) {
		s := start(t, kinds[0], Config{ConnTimeout: time.Minute, MaxConns: -1}, echo())
		srv := s.(*Server)
		h := spawnClients(t, s.Addr().String(), 20)
		// Headroom for a handful of accepted sockets, then EMFILE on accept.
		restore := setNofile(t, openFDs(t)+4)
		// The helper may dial fewer than 20 if the backlog is reset by the dying engine.
		h.expect(t, "dialed")
		waitFor(t, "engine restart", func() bool { return srv.Stats().Restarts >= 1 })
		restore()
		var got []byte
		waitFor(t, "served after restart", func() bool {
			c, err := net.DialTimeout("tcp", s.Addr().String(), testIO)
			if err != nil {
				return false
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(testIO))
			if _, err := c.Write(encode([]byte("again"))); err != nil {
				return false
			}
			got, _ = io.ReadAll(c)
			return len(got) > 0
		})
		if !bytes.Equal(got, encode([]byte("again"))) {
			t.Fatalf("got %q after restart", got)
		}
		t.Logf("stats after restart: %+v", s.Stats())
	})
	forKinds(t, func(t *testing.T, k serverKind) {
		const headroom = 80 // descriptors left to connections under the derived cap
		soft := openFDs(t) + fdReserve + headroom
		restore := setNofile(t, soft)
		s := start(t, k, Config{ConnTimeout: time.Minute}, echo()) // MaxConns derived at Start
		restore()
		wantCap := int64(max(minMaxConns, int(soft)-fdReserve))
		// The cap was derived from the lowered limit; the test itself must not run out of
		// descriptors whatever limit the machine it runs on started with.
		raiseNofile(t, int(soft)+3*int(wantCap))
		h := spawnClients(t, s.Addr().String(), 2*int(wantCap))
		if n := h.expect(t, "dialed"); n != 2*int(wantCap) {
			t.Fatalf("helper dialed %d of %d", n, 2*wantCap)
		}
		deadline := time.Now().Add(testWait)
		for st := s.Stats(); st.Open != wantCap || st.Refused+uint64(st.Open) != 2*uint64(wantCap); st = s.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("want %d open and %d refused: %+v", wantCap, wantCap, st)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if st := s.Stats(); st.Restarts != 0 {
			t.Fatalf("engine restarted: %+v", st)
		}
		t.Logf("%s: derived MaxConns %d: %+v", k.name, wantCap, s.Stats())
		// Once the idle clients go away, the server serves again.
		_ = h.stdin.Close()
		waitFor(t, "open == 0", func() bool { return s.Stats().Open == 0 })
		if got := roundTrip(t, s, []byte("still here")); !bytes.Equal(got, encode([]byte("still here"))) {
			t.Fatalf("got %q", got)
		}
	})
}

// TestServer_CapExactAcrossLoops: many event loops opening connections at once never push
// Open past MaxConns.
func TestServer_CapExactAcrossLoops(t *testing.T) {
	const maxConns, dials = 16, 400
	s := start(t, kinds[0], Config{ConnTimeout: time.Minute, MaxConns: maxConns, Loops: 8}, echo())
	var wg sync.WaitGroup
	conns := make(chan net.Conn, dials)
	for range dials {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, err := net.DialTimeout("tcp", s.Addr().String(), testIO); err == nil {
				conns <- c
			}
		}()
	}
	wg.Wait()
	close(conns)
	defer func() {
		for c := range conns {
			_ = c.Close()
		}
	}()
	waitFor(t, "every dial accepted or refused", func() bool {
		st := s.Stats()
		return st.Open+int64(st.Refused) == dials || st.Open > maxConns
	})
	if st := s.Stats(); st.Open != maxConns {
		t.Fatalf("Open = %d, want exactly MaxConns %d: %+v", st.Open, maxConns, st)
	}
}
