package scenarios

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// job is the output of one MPI job of ranks ranks, round robin over nodes, as hello.c writes it.
func job(ranks int, nodes []string) (stdout, stderr string) {
	var b strings.Builder
	for r := 0; r < ranks; r++ {
		fmt.Fprintf(&b, "hello from rank %d of %d on %s\n", r, ranks, nodes[r%len(nodes)])
	}
	fmt.Fprintf(&b, "allreduce sum %d of %d ranks ok\n", ranks*(ranks+1)/2, ranks)
	return b.String(), "barrier took 0.012500 s\n"
}

func TestCheckMPIOutput(t *testing.T) {
	nodes := []string{"bgo", "bgo2", "bgo3", "bgo4"}
	out, errOut := job(8, nodes)
	ms, err := checkMPIOutput(out, errOut, 8, nodes)
	if err != nil || ms != 12.5 {
		t.Fatalf("a good job: %v ms, %v", ms, err)
	}
	// Ranks without PMI: each one a job of its own.
	var single, singleErr strings.Builder
	for r := 0; r < 8; r++ {
		o, e := job(1, nodes[r%4:r%4+1])
		single.WriteString(o)
		singleErr.WriteString(e)
	}
	for _, c := range []struct {
		name, stdout, stderr string
		want                 string
	}{
		{"singletons", single.String(), singleErr.String(), "8 of 8 ranks came up as singletons"},
		{"a rank missing", strings.Replace(out, "hello from rank 5 of 8 on bgo2\n", "", 1), errOut, "rank 5 said hello 0 times"},
		{"a rank twice", out + "hello from rank 5 of 8 on bgo2\n", errOut, "rank 5 said hello 2 times"},
		{"wrong size", strings.Replace(out, "rank 3 of 8", "rank 3 of 9", 1), errOut, "hello from rank 3 of 9, in a job of 8 ranks"},
		{"foreign node", strings.Replace(out, "on bgo4", "on bstock", 1), errOut, "not one of the job's nodes"},
		{"bad sum", strings.Replace(out, "sum 36", "sum 35", 1), errOut, "allreduce sum 35 of 8 ranks, want 36"},
		{"no sum", strings.Replace(out, "allreduce", "allreduced", 1), errOut, "0 allreduce lines"},
		{"no barrier", out, "", "0 barrier lines"},
		{"two barriers", out, errOut + errOut, "2 barrier lines"},
	} {
		if _, err := checkMPIOutput(c.stdout, c.stderr, 8, nodes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Eight ranks on three of the four nodes: not the job asked for.
	out, errOut = job(8, nodes[:3])
	if _, err := checkMPIOutput(out, errOut, 8, nodes); err == nil || !strings.Contains(err.Error(), "ranks ran on 3 of the job's 4 nodes") {
		t.Errorf("three nodes: %v", err)
	}
}

func TestSummarizeMPI(t *testing.T) {
	r := &results.MPIStartup{Runs: 5, StartupMs: []float64{50, 10, 40, 20, 30}, WallMs: []float64{60, 20, 50, 30, 40}}
	summarizeMPI(r)
	if r.OK != 5 || r.Startup != (results.MsStats{P50: 30, Min: 10, Max: 50, Mean: 30}) || r.Wall.P50 != 40 {
		t.Fatalf("%+v", r)
	}
	if r.StartupMs[0] != 50 {
		t.Fatal("summarizeMPI reordered the recorded times")
	}
}

// mpi-startup runs after the other job scenarios; without a daemon with 4 nodes it fails
// (it is never "not measured yet").
func TestRegistry_MPIStartupMeasures(t *testing.T) {
	pos := map[string]int{}
	for i, s := range Registry {
		pos[s.Name()] = i
		if _, ok := s.(planned); ok && s.Name() == "mpi-startup" {
			t.Fatal("mpi-startup is a placeholder")
		}
	}
	if p, ok := pos["mpi-startup"]; !ok || p < pos["stepd-rss"] {
		t.Fatalf("registry order %v", pos)
	}
	env := &Env{Ctx: context.Background(), Profile: Smoke(), Res: &results.Results{}, Logf: func(string, ...any) {}}
	RunAll(env, map[string]bool{"mpi-startup": true})
	if len(env.Res.Status) != 1 || env.Res.Status[0].Status != results.StatusFailed || len(env.Res.MPI) != 0 {
		t.Fatalf("mpi-startup without daemons: %+v %+v", env.Res.Status, env.Res.MPI)
	}
	if p := Smoke(); p.MPIRuns != 1 || p.MPIRanks != 8 || p.MPIWarmup {
		t.Fatalf("smoke: %d runs of %d ranks, warm-up %v", p.MPIRuns, p.MPIRanks, p.MPIWarmup)
	}
	if p := Full(); p.MPIRanks != 64 || p.MPIRuns < 3 {
		t.Fatalf("full: %d runs of %d ranks", p.MPIRuns, p.MPIRanks)
	}
}
