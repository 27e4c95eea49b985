package topoapi

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pluginDir holds the tiee_topology SPANK plugin (spank/topology).
const pluginDir = "../../../spank/topology"

// buildHarness compiles the plugin (as `make spank-plugin` does, to catch
// build errors) and its test harness, which stubs the SPANK API. gcc and
// <slurm/spank.h> come with scripts/install-deps.sh (gcc, libslurm-dev).
func buildHarness(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("no gcc (scripts/install-deps.sh installs it): %v", err)
	}
	if _, err := os.Stat("/usr/include/slurm/spank.h"); err != nil {
		t.Fatalf("no /usr/include/slurm/spank.h (libslurm-dev, scripts/install-deps.sh): %v", err)
	}
	dir := t.TempDir()
	flags := []string{"-O2", "-Wall", "-Wextra", "-Werror", "-std=gnu11", "-I/usr/include"}
	for _, args := range [][]string{
		append(flags, "-shared", "-fPIC", "-o", filepath.Join(dir, "tiee_topology.so"), filepath.Join(pluginDir, "tiee_topology.c")),
		append(flags, "-o", filepath.Join(dir, "harness"), filepath.Join(pluginDir, "tiee_topology_test.c")),
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return filepath.Join(dir, "harness")
}

func TestPluginHostlist(t *testing.T) {
	h := buildHarness(t)
	out, err := exec.Command(h, "expand", "n[1-3,5],x7", "a[08-10]b", "r[1-2]c[1-2]", "n[1-", "n[3-1]", "a[1]]", "n1 n2").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "n[1-3,5],x7: n1 n2 n3 n5 x7\na[08-10]b: a08b a09b a10b\nr[1-2]c[1-2]: r1c1 r1c2 r2c1 r2c2\n" +
		"n[1-: invalid\nn[3-1]: invalid\na[1]]: invalid\nn1 n2: n1 n2\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

func TestPluginUserInit(t *testing.T) {
	h := buildHarness(t)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downPort := down.Addr().(*net.TCPAddr).Port
	down.Close() // nothing listens there: connection refused
	upPort := uint16(up.Addr().(*net.TCPAddr).Port)
	path, _ := serve(t, mapSource{
		"n1":  {Name: "n1", Addr: "127.0.0.1", Port: upPort, Zone: "za"},
		"n2":  {Name: "n2", Addr: "127.0.0.1", Port: upPort, Zone: "za", Block: "b1"},
		"n10": {Name: "n10", Addr: "127.0.0.1", Port: upPort, Zone: "za"},
		"n3":  {Name: "n3", Addr: "127.0.0.1", Port: uint16(downPort), Zone: "zb"},
		"n4":  {Name: "n4", Addr: "127.0.0.1", Port: upPort, Zone: "zb"},
	})
	for _, tc := range []struct {
		name, nodes, mode string
		args              []string
		want              string
	}{
		{"one zone", "n[10,2,1]", "zone", nil,
			"setenv TIEE_TOPOLOGY_ZONE=za\nsetenv TIEE_TOPOLOGY_ZONES=za\nsetenv TIEE_TOPOLOGY_BLOCK=-\n" +
				"setenv TIEE_TOPOLOGY_NODES_BY_ZONE=n1,n2,n10\nrc 0\n"},
		{"unreachable", "n[1-3]", "switch", []string{"probe_timeout=2"},
			"error: tiee-topology: job 42: n1 (zone za) cannot reach n3 (zone zb) at 127.0.0.1:" + strconv.Itoa(downPort) +
				": Connection refused; the job's nodes span zones za,zb\nrc -1\n"},
		{"two zones", "n[1,4]", "zone", nil,
			"error: tiee-topology: job 42: --topology=zone, but the step's nodes span zones za,zb\nrc -1\n"},
		{"probe=all, best effort", "n4,n1", "-", []string{"probe=all"},
			"setenv TIEE_TOPOLOGY_ZONE=za\nsetenv TIEE_TOPOLOGY_ZONES=za,zb\nsetenv TIEE_TOPOLOGY_BLOCK=-\n" +
				"setenv TIEE_TOPOLOGY_NODES_BY_ZONE=n1,n4\nrc 0\n"},
		{"no option", "n[1-2]", "-", nil, "rc 0\n"},
		{"bad option", "n[1-2]", "rack", nil, "error: tiee-topology: --topology=rack: want zone, block or switch\nrc -1\n"},
		{"unknown node", "n1,nx", "zone", nil,
			"info: tiee-topology: job 42: nx is unknown to the topology API; not probed\n" +
				"error: tiee-topology: job 42: --topology=zone, but the step's nodes span zones -,za\nrc -1\n"},
		{"no daemon", "n[1-2]", "zone", nil, ""},
	} {
		sock := path
		if tc.name == "no daemon" {
			sock = filepath.Join(t.TempDir(), "none.sock")
			tc.want = "error: tiee-topology: job 42: cannot connect to the topology API at " + sock + ": No such file or directory\nrc -1\n"
		}
		args := append([]string{"run", sock, tc.nodes, "n1", tc.mode}, tc.args...)
		out, err := exec.Command(h, args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", tc.name, err, out)
			continue
		}
		if string(out) != tc.want {
			t.Errorf("%s: got:\n%s\nwant:\n%s", tc.name, out, tc.want)
		}
	}
}
