package ring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func baseConfig(dir string) Config {
	return Config{
		Bytes: 4 * 12 * 100, Warmup: 1, Iters: 3, Rendezvous: dir, ListenIP: "127.0.0.1",
		ConnectTimeout: 5 * time.Second, StepTimeout: 5 * time.Second,
	}
}

// runRanks runs ranks 0..n-1 of one ring as goroutines; edit adjusts each rank's Config.
func runRanks(n int, cfg Config, edit func(*Config)) ([]*Result, []error) {
	res, errs := make([]*Result, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			c := cfg
			c.Rank, c.Size, c.Node = r, n, fmt.Sprintf("node%d", r)
			if edit != nil {
				edit(&c)
			}
			res[r], errs[r] = Run(context.Background(), c)
		})
	}
	wg.Wait()
	return res, errs
}

func TestRun(t *testing.T) {
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			dir := t.TempDir()
			res, errs := runRanks(n, baseConfig(dir), nil)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			got := res[0]
			if got.Ranks != n || got.Bytes != 4*12*100 || got.Warmup != 1 || len(got.Steps) != 3 {
				t.Errorf("result %+v, want %d ranks, %d bytes, warmup 1, 3 steps", got, n, 4*12*100)
			}
			for r, node := range got.Nodes {
				if node != fmt.Sprintf("node%d", r) {
					t.Errorf("nodes %q, want node0..node%d in rank order", got.Nodes, n-1)
					break
				}
			}
			if len(got.Nodes) != n {
				t.Errorf("nodes %q, want %d", got.Nodes, n)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("rendezvous files left behind: %v", left)
			}
		})
	}
}

// TestRunLarge sends 8 MiB chunks, more than loopback's socket buffers hold (4 MiB already
// stalls a send-then-receive pair on Linux): a ring that sent before receiving would hang.
func TestRunLarge(t *testing.T) {
	cfg := baseConfig(t.TempDir())
	cfg.Bytes, cfg.Warmup, cfg.Iters = 16<<20, 0, 1
	for r, err := range func() []error { _, e := runRanks(2, cfg, nil); return e }() {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestMissingSuccessor(t *testing.T) {
	cfg := baseConfig(t.TempDir())
	cfg.Size, cfg.ConnectTimeout = 2, 300*time.Millisecond
	t0 := time.Now()
	_, err := Run(context.Background(), cfg)
	if d := time.Since(t0); d > time.Second {
		t.Errorf("failed after %v, want about 300ms", d)
	}
	if err == nil || !strings.Contains(err.Error(), "cannot reach rank 1") &&
		!strings.Contains(err.Error(), "no connection from rank 1") {
		t.Fatalf("error %v, want cannot reach rank 1 or no connection from rank 1", err)
	}
	t.Log(err)
}

func TestSuccessorPortClosed(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := os.WriteFile(filepath.Join(dir, "rank-1"), []byte(addr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(dir)
	cfg.Size, cfg.ConnectTimeout = 2, 300*time.Millisecond
	t0 := time.Now()
	_, err = Run(context.Background(), cfg)
	if d := time.Since(t0); d > time.Second {
		t.Errorf("failed after %v, want about 300ms", d)
	}
	if want := "cannot reach rank 1 at " + addr + " within 300ms"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	t.Log(err)
}

func TestBadBytes(t *testing.T) {
	for _, tc := range []struct{ n, bytes int }{{3, 4*3*10 + 4}, {2, 6}, {1, 2}, {2, 0}} {
		cfg := baseConfig(t.TempDir())
		cfg.Size, cfg.Bytes = tc.n, tc.bytes
		_, err := Run(context.Background(), cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "multiple of 4*ranks") {
			t.Errorf("%d ranks, %d bytes: error %v, want a multiple-of error", tc.n, tc.bytes, err)
		}
	}
}

// TestMismatchedBytes: ranks that disagree on the size fail at the intro, not by hanging.
func TestMismatchedBytes(t *testing.T) {
	_, errs := runRanks(2, baseConfig(t.TempDir()), func(c *Config) { c.Bytes = 64 * (c.Rank + 1) })
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("errors %v, want both ranks to fail", errs)
	}
	if !strings.Contains(errs[0].Error()+errs[1].Error(), "intro") {
		t.Errorf("errors %v, want an intro mismatch", errs)
	}
}

// TestStepTimeout: a predecessor that introduces itself and then goes quiet times the
// iteration out.
func TestStepTimeout(t *testing.T) {
	dir := t.TempDir()
	cfg := baseConfig(dir)
	cfg.Size, cfg.Warmup, cfg.Iters, cfg.StepTimeout = 2, 0, 1, 200*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.WriteFile(filepath.Join(dir, "rank-1"), []byte(ln.Addr().String()+"\n"), 0o644)
	go func() { // fake rank 1: accept rank 0, dial it, swap intros, then send nothing
		in, err := ln.Accept()
		if err != nil {
			return
		}
		defer in.Close()
		var b []byte
		for b == nil {
			b, _ = os.ReadFile(filepath.Join(dir, "rank-0"))
			time.Sleep(5 * time.Millisecond)
		}
		out, err := net.Dial("tcp", strings.TrimSpace(string(b)))
		if err != nil {
			return
		}
		defer out.Close()
		out.Write(intro(1, 2, cfg.Bytes, "fake"))
		io.Copy(io.Discard, in) // until rank 0 gives up
	}()
	res, err := Run(context.Background(), cfg)
	if err == nil {
		t.Fatalf("no error, result %+v", res)
	}
	want := "rank 0 (node ): iteration 1 of 1: step timeout 200ms exceeded: reduce-scatter step 1 of 1: receiving from rank 1"
	if !strings.Contains(err.Error(), want) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("error %v, want %q", err, want)
	}
	t.Log(err)
}

func TestResultJSON(t *testing.T) {
	r := &Result{Ranks: 2, Bytes: 64, Warmup: 1, Nodes: []string{"a", "b"},
		Steps: []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}}
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ranks":2,"bytes":64,"warmup":1,"steps_s":[0.1,0.4,0.2,0.3],"median_s":0.25,"min_s":0.1,"max_s":0.4,"nodes":["a","b"],"ok":true}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
}
