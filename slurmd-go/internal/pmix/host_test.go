package pmix

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepd"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TestHost_PreforkBadStep: a step the server cannot be set up for fails
// its launch with the cause, as stock's pmixp_info_set does.
func TestHost_PreforkBadStep(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=c\nSlurmctldHost=h\nSlurmdSpoolDir=/tmp/%n\nNodeName=n[1-2]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	launch := &slurmproto.LaunchTasks{
		StepID:        slurmproto.StepID{JobID: 9, StepID: 0},
		GlobalTaskIDs: [][]uint32{{0}, {1}},
		HetJobID:      slurmproto.NoVal,
	}
	good := stepd.Env{"SLURM_STEP_NODELIST=n[1-2]", "SLURM_PMIX_MAPPING_SERV=(vector,(0,2,1))"}
	cases := []struct {
		name string
		env  stepd.Env
		edit func(*slurmproto.LaunchTasks, *stepapi.StartSpec)
		want string
	}{
		{"no node list", stepd.Env{"SLURM_PMIX_MAPPING_SERV=x"}, nil, "SLURM_STEP_NODELIST not found"},
		{"bad node list", stepd.Env{"SLURM_STEP_NODELIST=n[1-", "SLURM_PMIX_MAPPING_SERV=x"}, nil, `SLURM_STEP_NODELIST "n[1-"`},
		{"no mapping", stepd.Env{"SLURM_STEP_NODELIST=n[1-2]"}, nil, "no SLURM_PMIX_MAPPING_SERV"},
		{"nodes differ", good, func(l *slurmproto.LaunchTasks, _ *stepapi.StartSpec) { l.GlobalTaskIDs = [][]uint32{{0, 1}} }, "2 nodes in SLURM_STEP_NODELIST, 1 in the launch"},
		{"het step", good, func(l *slurmproto.LaunchTasks, _ *stepapi.StartSpec) { l.HetJobID = 8 }, "heterogeneous steps"},
		// last: the file stays until the test ends
		{"bad mpi.conf", good, func(_ *slurmproto.LaunchTasks, s *stepapi.StartSpec) {
			mpiConf := filepath.Join(filepath.Dir(s.ConfFile), "mpi.conf")
			if err := os.WriteFile(mpiConf, []byte("PMIxEnv=A=1\nPMIxTimeout=soon\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(mpiConf) })
		}, "mpi.conf:2: PMIxTimeout value (soon) is not a valid number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := *launch
			spec := &stepapi.StartSpec{ConfFile: conf, SpoolDir: t.TempDir(), TmpFS: t.TempDir()}
			if c.edit != nil {
				c.edit(&l, spec)
			}
			sc, err := slurmconf.Load(spec.ConfFile, slurmconf.Options{Version: slurmconf.Lenient})
			if err != nil {
				t.Fatal(err)
			}
			h, err := newHost(&stepd.MPIStep{Spec: spec, Launch: &l, NodeID: 0, GTIDs: []uint32{0}, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()),
				Conf: sc, ConfPath: spec.ConfFile, Log: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Fini()
			env := append(stepd.Env{}, c.env...)
			err = h.Prefork(context.Background(), &env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestApplyConf: PMIxEnv reaches the step's environment (so every task's)
// and the server's; PMIxDebug becomes the library's PMIX_DEBUG unless the
// step sets its own.
func TestApplyConf(t *testing.T) {
	pc, err := slurmconf.ParsePMIx(strings.NewReader("PMIxEnv=TIEE_PMIX_ENV=set;PMIX_MCA_a=b=c\nPMIxDebug=3\nPMIxFenceBarrier=yes\n"), "/c/mpi.conf")
	if err != nil {
		t.Fatal(err)
	}
	env := stepd.Env{"TIEE_PMIX_ENV=user", "HOME=/h"}
	helper := applyConf(&env, pc, hclog.NewNullLogger())
	if v, _ := env.Get("TIEE_PMIX_ENV"); v != "set" {
		t.Errorf("TIEE_PMIX_ENV=%q in the step, want set (mpi.conf overwrites)", v)
	}
	if v, _ := env.Get("PMIX_MCA_a"); v != "b=c" {
		t.Errorf("PMIX_MCA_a=%q in the step", v)
	}
	want := []string{"TIEE_PMIX_ENV=set", "PMIX_MCA_a=b=c", "PMIX_DEBUG=3", "PMIX_OUTPUT_REDIRECT=file"}
	if !slices.Equal(helper, want) {
		t.Errorf("helper env %q, want %q", helper, want)
	}
	env = stepd.Env{"PMIX_DEBUG=9"}
	if helper := applyConf(&env, pc, hclog.NewNullLogger()); !slices.Contains(helper, "PMIX_DEBUG=9") || slices.Contains(helper, "PMIX_DEBUG=3") {
		t.Errorf("step PMIX_DEBUG=9: helper env %q", helper)
	}
}
