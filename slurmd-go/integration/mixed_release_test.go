//go:build integration

package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// mixedJobTimeout bounds one job of TestMixedRelease.
const mixedJobTimeout = 90 * time.Second

// TestMixedRelease_2411NodesUnder2605: a node daemon that speaks 24.11 (0x2A00) joins a
// 26.05 slurmctld, as a stock 24.11 slurmd does (every controller from 24.11 to 26.05
// accepts it): the reference is stock 24.11.5's slurmd, the cluster under test runs
// slurmd-go pinned to 24.11 (TIEE_SLURM_PROTOCOL=24.11). The node daemons and their
// jobs live in the 24.11 chroot (so a job's srun is 24.11's), slurmctld and the
// commands the test runs in the 26.05 one. Both register (idle, Version=24.11.5), and
// an sbatch job of root and of the ordinary user, whose batch step runs an inner srun
// over both nodes, completes with the same output on both clusters. Its releases are its
// own, whatever the run's (munge: auth/slurm keeps its sockets in one chroot only).
func TestMixedRelease_2411NodesUnder2605(t *testing.T) {
	p := startPair(t, func(impl string) cluster.Options {
		o := cluster.Options{Impl: impl, Release: "26.05", NodeRelease: "24.11", Auth: cluster.AuthMunge, Nodes: 2,
			NodePrefix: cluster.RandomNodePrefix()}
		if impl != cluster.ImplStock { // slurmd-go (the env's impl): pinned
			o.DaemonEnv = []string{"TIEE_SLURM_PROTOCOL=24.11"}
		}
		return o
	})
	for _, c := range p.both() {
		for _, n := range c.NodeNames() {
			if v := c.ShowNode(t, n)["Version"]; v != c.StockVersion || !strings.HasPrefix(v, "24.11.") {
				t.Errorf("%s: node %s Version=%q, want the 24.11 stock slurmd's %q", p.label(c), n, v, c.StockVersion)
			}
		}
	}
	// The pinned daemon says so and never tries 26.05.
	if p.sut.Impl == cluster.ImplGo {
		log := readFile(t, p.sut.NodeLog(node(p.sut, 0)))
		if !strings.Contains(log, "protocol pinned") || strings.Contains(log, "version=0x2d00") {
			t.Errorf("slurmd-go's log: want the pin and no 0x2d00 exchange:\n%s", linesWith(log, "protocol"))
		}
	}

	script := "#!/bin/bash\n" +
		"echo \"batch on $SLURMD_NODENAME as $(id -un), $SLURM_JOB_NUM_NODES nodes\"\n" +
		"srun -N2 -n2 --label bash -c 'echo \"task $SLURM_PROCID on $SLURMD_NODENAME, srun $(srun --version)\"' | sort\n" +
		"echo \"inner srun exit $?\"\n"
	for _, user := range []string{"root", cluster.TestUser} {
		t.Run(user, func(t *testing.T) {
			ref, sut := submitBoth(t, p, user, script, func(*cluster.Cluster) []string { return []string{"-N2"} }, "mixed")
			fr, fs := waitBoth(t, ref, sut, mixedJobTimeout, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")
			sameFields(t, "mixed-release job", fr, fs, map[string]string{"JobState": "COMPLETED", "ExitCode": "0:0"}, "JobState", "ExitCode")
			outs := map[*cluster.Cluster]string{}
			for _, j := range []jobOf{ref, sut} {
				out, ok := readJobFile(t, filepath.Join(j.dir, "slurm-"+j.id+".out"))
				if !ok {
					t.Fatalf("%s: no output file for job %s", p.label(j.c), j.id)
				}
				outs[j.c] = normalizer(j.c, nil)(out)
			}
			want := fmt.Sprintf("batch on <NODE>1 as %s, 2 nodes\n"+
				"0: task 0 on <NODE>1, srun slurm-wlm %[2]s\n"+
				"1: task 1 on <NODE>2, srun slurm-wlm %[2]s\n"+
				"inner srun exit 0\n", user, p.ref.StockVersion)
			if outs[p.ref] != want {
				t.Errorf("reference(stock) output %q, want %q", outs[p.ref], want)
			}
			if outs[p.sut] != outs[p.ref] {
				t.Errorf("output under test %q, reference %q", outs[p.sut], outs[p.ref])
			}
		})
	}
}

// linesWith keeps the lines of s that contain word.
func linesWith(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
