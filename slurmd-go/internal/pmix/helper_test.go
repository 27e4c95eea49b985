package pmix

import (
	"bufio"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// pairedHelper is a helper whose other end the test holds, speaking for
// the C program.
func pairedHelper(t *testing.T) (*helper, *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.SetNonblock(fds[0], true)
	syscall.SetNonblock(fds[1], true)
	ours, peer := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	t.Cleanup(func() { ours.Close(); peer.Close() })
	done := make(chan struct{})
	close(done) // no process: exitErr adds nothing
	return &helper{log: hclog.NewNullLogger(), conn: ours, r: bufio.NewReader(ours), done: done}, peer
}

func envFrame(rank uint32, env ...string) []byte {
	b := u32(rank)
	for _, e := range env {
		b = append(append(b, e...), 0)
	}
	return b
}

func TestHelper_Setup(t *testing.T) {
	type fr struct {
		typ byte
		p   []byte
	}
	cases := []struct {
		name   string
		frames []fr
		close  bool
		want   string // error text; "" = success
	}{
		{"ready", []fr{{msgEnv, envFrame(1, "PMIX_RANK=1")}, {msgEnv, envFrame(3, "PMIX_RANK=3")}, {msgReady, nil}}, false, ""},
		{"env of another node's rank", []fr{{msgEnv, envFrame(0, "PMIX_RANK=0")}}, false, "rank 0, not a local rank"},
		{"env twice", []fr{{msgEnv, envFrame(1)}, {msgEnv, envFrame(1)}}, false, "rank 1, not a local rank still waiting"},
		{"ready too soon", []fr{{msgEnv, envFrame(1)}, {msgReady, nil}}, false, "ready with 1 of 2"},
		{"short env", []fr{{msgEnv, []byte{1}}}, false, "environment frame of 1 bytes"},
		{"unterminated env", []fr{{msgEnv, append(u32(1), "A=1"...)}}, false, "not NUL-terminated"},
		{"helper error", []fr{{msgError, []byte("PMIx_server_init: UNREACHABLE")}}, false, "helper failed: PMIx_server_init: UNREACHABLE"},
		{"fence before ready", []fr{{msgFence, nil}}, false, "frame 'f' during setup"},
		{"helper gone", nil, true, "helper setup: unexpected EOF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, peer := pairedHelper(t)
			job := testJob()
			go func() {
				r := bufio.NewReader(peer)
				f, err := readFrame(r)
				if err != nil || f.typ != msgJob {
					peer.Close()
					return
				}
				for _, x := range c.frames {
					writeFrame(peer, x.typ, x.p)
				}
				if c.close {
					peer.Close()
				}
			}()
			envs, err := h.setup(context.Background(), &job)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(envs[1], ",") != "PMIX_RANK=1" || strings.Join(envs[3], ",") != "PMIX_RANK=3" {
					t.Fatalf("envs %v", envs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestHelper_SetupTimeout: a helper that never answers is a bounded wait.
func TestHelper_SetupTimeout(t *testing.T) {
	h, _ := pairedHelper(t)
	job := testJob()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.setup(ctx, &job); err == nil || !strings.Contains(err.Error(), "helper not ready") {
		t.Fatalf("error %v, want not ready", err)
	}
}

type recordEvents struct {
	fences []fenceMsg
	reqs   [][2]uint32
	served []uint32
	aborts []string
}

func (r *recordEvents) fence(m fenceMsg)                         { r.fences = append(r.fences, m) }
func (r *recordEvents) modexRequest(id, rank uint32)             { r.reqs = append(r.reqs, [2]uint32{id, rank}) }
func (r *recordEvents) modexServed(id uint32, _ int32, _ []byte) { r.served = append(r.served, id) }
func (r *recordEvents) abort(_ int32, _ uint32, msg string)      { r.aborts = append(r.aborts, msg) }

func TestHelper_Serve(t *testing.T) {
	fence := append(append(u32(4), 1), u32(1)...)
	fence = append(append(fence, u32(rankWildcard)...), "x"...)
	cases := []struct {
		name string
		typ  byte
		p    []byte
		want string // error; "" = clean end after the frame
	}{
		{"fence", msgFence, fence, ""},
		{"modex request", msgModexReq, append(u32(1), u32(2)...), ""},
		{"modex answer", msgModexAnswer, append(u32(1), u32(0)...), ""},
		{"abort", msgAbort, append(append(u32(3), u32(0)...), "bye"...), ""},
		{"short fence", msgFence, []byte{0, 1}, "fence frame of 2 bytes"},
		{"short modex request", msgModexReq, u32(1), "modex request of 4 bytes"},
		{"short abort", msgAbort, u32(1), "abort frame of 4 bytes"},
		{"unknown type", 'Z', nil, "unexpected frame 'Z'"},
		{"ready again", msgReady, nil, "unexpected frame 'O'"},
		{"helper error", msgError, []byte("boom"), "helper failed: boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, peer := pairedHelper(t)
			writeFrame(peer, c.typ, c.p)
			peer.Close()
			var ev recordEvents
			err := h.serve(&ev)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(ev.fences)+len(ev.reqs)+len(ev.served)+len(ev.aborts) != 1 {
					t.Fatalf("events %+v, want one", ev)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if c.typ != msgError && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not ErrProtocol", err)
			}
		})
	}
}
