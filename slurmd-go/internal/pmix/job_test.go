package pmix

import (
	"errors"
	"strings"
	"testing"
)

func testJob() Job {
	lib, cli := Dirs("/var/spool/slurmd/n1", "/tmp/n1", 1000, 42, 3)
	return Job{
		JobID: 42, StepID: 3, UID: 1000, GID: 100, NodeID: 1,
		Nodes:     []string{"n0", "n1"},
		NodeRanks: [][]uint32{{0, 2}, {1, 3}},
		ANLMap:    "(vector,(0,2,1))",
		LibTmpDir: lib, CliTmpDir: cli, CliTmpDirBase: "/tmp/n1",
	}
}

func TestDirs_StockNames(t *testing.T) {
	j := testJob()
	if j.LibTmpDir != "/var/spool/slurmd/n1/pmix.42.3/" {
		t.Errorf("lib tmpdir %q", j.LibTmpDir)
	}
	if j.CliTmpDir != "/tmp/n1/spmix_appdir_1000_42.3" {
		t.Errorf("cli tmpdir %q", j.CliTmpDir)
	}
	if j.Namespace() != "slurm.pmix.42.3" || SocketName(42, 3) != "stepd-go.pmix.42.3" {
		t.Errorf("namespace %q socket %q", j.Namespace(), SocketName(42, 3))
	}
}

func TestJob_Encode(t *testing.T) {
	j := testJob()
	got, err := cstrings(j.encode())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"nspace=slurm.pmix.42.3", "jobid=42.3", "uid=1000", "gid=100", "nodeid=1", "ntasks=4",
		"hosts=n0,n1", "node_ranks=0,2;1,3", "anl_map=(vector,(0,2,1))",
		"lib_tmpdir=/var/spool/slurmd/n1/pmix.42.3/", "cli_tmpdir=/tmp/n1/spmix_appdir_1000_42.3", "cli_tmpdir_base=/tmp/n1",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("encoded\n%q\nwant\n%q", got, want)
	}
}

func TestJob_Validate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Job)
		want string
	}{
		{"good", func(*Job) {}, ""},
		{"rank lists short", func(j *Job) { j.NodeRanks = j.NodeRanks[:1] }, "2 nodes, 1 rank lists"},
		{"node index", func(j *Job) { j.NodeID = 2 }, "node index 2"},
		{"repeated rank", func(j *Job) { j.NodeRanks[1] = []uint32{1, 2} }, "rank 2 on node n1"},
		{"rank out of range", func(j *Job) { j.NodeRanks[1] = []uint32{1, 9} }, "rank 9"},
		{"no local tasks", func(j *Job) { j.NodeRanks = [][]uint32{{0, 1, 2}, {}}; j.NodeID = 1 }, "no tasks on node n1"},
		{"comma in a name", func(j *Job) { j.Nodes[0] = "a,b" }, `node name "a,b"`},
		{"NUL in a path", func(j *Job) { j.CliTmpDir = "/tmp/\x00" }, "a NUL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := testJob()
			c.edit(&j)
			err := j.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrJob) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrJob with %q", err, c.want)
			}
		})
	}
}

func TestParseTimeout(t *testing.T) {
	for in, want := range map[string]string{"": "5m0s", "x": "5m0s", "-3": "5m0s", "0": "5m0s", "12": "12s"} {
		if got := ParseTimeout(in).String(); got != want {
			t.Errorf("ParseTimeout(%q) = %s, want %s", in, got, want)
		}
	}
}
