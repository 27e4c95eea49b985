package topoapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
)

type mapSource map[string]NodeInfo

func (m mapSource) Nodes(names []string) []NodeInfo {
	var out []NodeInfo
	for _, n := range names {
		ni, ok := m[n]
		if !ok {
			ni = NodeInfo{Name: n}
		}
		out = append(out, ni)
	}
	return out
}

var testNodes = mapSource{
	"n1": {Name: "n1", Addr: "10.1.1.1", Port: 6818, Zone: "za"},
	"n2": {Name: "n2", Addr: "10.1.2.2", Port: 6818, Zone: "zb", Block: "b1"},
}

// serve starts a server on a socket in a temporary directory.
func serve(t *testing.T, src Source) (string, *Server) {
	t.Helper()
	path := filepath.Join(t.TempDir(), SocketName)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(src, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return path, srv
}

// ask sends req raw and returns the whole reply.
func ask(t *testing.T, path, req string) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGolden(t *testing.T) {
	path, _ := serve(t, testNodes)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	got := ask(t, path, "TIEE-TOPOLOGY 1 NODES n2,n1,n9,n1\n")
	want := "node n2 addr 10.1.2.2 port 6818 zone zb block b1\n" +
		"node n1 addr 10.1.1.1 port 6818 zone za block -\n" +
		"node n9 addr - port - zone - block -\n" +
		"end\n"
	if got != want {
		t.Errorf("reply:\n%s\nwant:\n%s", got, want)
	}
	if got := FormatRequest([]string{"n1", "n2"}); got != "TIEE-TOPOLOGY 1 NODES n1,n2\n" {
		t.Errorf("FormatRequest = %q", got)
	}
}

func TestRefusals(t *testing.T) {
	path, _ := serve(t, testNodes)
	for _, tc := range []struct{ req, want string }{
		{"TIEE-TOPOLOGY 2 NODES n1\n", "error unsupported version 2, this daemon speaks 1\n"},
		{"TIEE-TOPOLOGY x\n", "error unsupported version x, this daemon speaks 1\n"},
		{"\n", "error bad request: empty request\n"},
		{"GET / HTTP/1.0\r\n", "error bad request: request does not start with TIEE-TOPOLOGY\n"},
		{"TIEE-TOPOLOGY\n", "error bad request: no protocol version\n"},
		{"TIEE-TOPOLOGY 1 NODES\n", "error bad request: want \"TIEE-TOPOLOGY 1 NODES <name>,<name>,...\"\n"},
		{"TIEE-TOPOLOGY 1 NODES n1 n2\n", "error bad request: want \"TIEE-TOPOLOGY 1 NODES <name>,<name>,...\"\n"},
		{"TIEE-TOPOLOGY 1 NODES n1,,n2\n", "error bad request: empty node name\n"},
		{"TIEE-TOPOLOGY 1 NODES n[1-2]\n", "error bad request: node name \"n[1-2]\": send expanded names, not a hostlist\n"},
		{"TIEE-TOPOLOGY 1 NODES n1", "error bad request: reading the request: connection closed before a newline: EOF\n"},
	} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, tc.req)
		if !strings.HasSuffix(tc.req, "\n") {
			_ = c.(*net.UnixConn).CloseWrite()
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, b, tc.want)
		}
	}
	// A line over the limit is refused, and the server still answers.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(c, "TIEE-TOPOLOGY 1 NODES "+strings.Repeat("n", MaxRequest+10)+"\n") }()
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if line != "error bad request: reading the request: request line too long\n" {
		t.Errorf("long line: %q", line)
	}
	if got := ask(t, path, "TIEE-TOPOLOGY 1 NODES n1\n"); !strings.HasPrefix(got, "node n1 ") {
		t.Errorf("after refusals: %q", got)
	}
}

func TestShutdown(t *testing.T) {
	path, srv := serve(t, testNodes)
	// A client that never sends keeps its connection until ReadTimeout;
	// Shutdown waits for it only as long as its context allows.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want deadline exceeded", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

func lines(text string) []slurmconf.Line {
	var out []slurmconf.Line
	for i, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, slurmconf.Line{File: "topology.conf", Line: i + 1, Text: l})
		}
	}
	return out
}

func TestParseTopology(t *testing.T) {
	topo, err := ParseTopology(lines(`SwitchName=za Nodes=n[1-2],x7 LinkSpeed=100
switchname=zb nodes=n[3-4]
SwitchName=top Switches=z[a-b]
BlockName=b1 Nodes=n[1-3]
BlockSizes=2,4`))
	if err != nil {
		t.Fatal(err)
	}
	for n, z := range map[string]string{"n1": "za", "n2": "za", "x7": "za", "n3": "zb", "n4": "zb"} {
		if topo.Zone[n] != z {
			t.Errorf("zone of %s = %q, want %q", n, topo.Zone[n], z)
		}
	}
	if len(topo.Zone) != 5 || topo.Block["n3"] != "b1" || topo.Block["n4"] != "" || len(topo.Block) != 3 {
		t.Errorf("topology = %+v", topo)
	}
	for _, bad := range []string{
		"SwitchName=za Nodes=n[1-2]\nSwitchName=zb Nodes=n2",
		"SwitchName=za Nodes=n[1-",
		"SwitchName=za garbage",
	} {
		if _, err := ParseTopology(lines(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestConfSource(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "slurm.conf")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(conf, "ClusterName=c\nSlurmctldHost=ctl\nSlurmdPort=6818\nTopologyPlugin=topology/tree\n"+
		"NodeName=n[1-2] NodeAddr=10.0.0.[1-2] Port=7001\nNodeName=n3\n")
	c, err := config.LoadAs(config.Flags{ConfFile: conf, NodeName: "n1"}, slurmconf.Lenient)
	if err != nil {
		t.Fatal(err)
	}
	src := &ConfSource{Config: func() *config.Config { return c }}
	want := []NodeInfo{{Name: "n1", Addr: "10.0.0.1", Port: 7001}, {Name: "n3", Addr: "n3", Port: 6818}, {Name: "nx"}}
	if got := src.Nodes([]string{"n1", "n3", "nx"}); !equal(got, want) {
		t.Errorf("no topology.conf: %+v", got)
	}
	write(TopologyConfPath(conf), "SwitchName=za Nodes=n1\nSwitchName=zb Nodes=n[2-3]\n")
	want[0].Zone, want[1].Zone = "za", "zb"
	if got := src.Nodes([]string{"n1", "n3", "nx"}); !equal(got, want) {
		t.Errorf("with topology.conf: %+v", got)
	}
	// A broken rewrite keeps the zones last read.
	write(TopologyConfPath(conf), "SwitchName=za Nodes=n[1-\n")
	if got := src.Nodes([]string{"n1", "n3", "nx"}); !equal(got, want) {
		t.Errorf("after a bad rewrite: %+v", got)
	}
}

func equal(a, b []NodeInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
