package pmix

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepd"
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
		{"no slurm.conf", good, func(_ *slurmproto.LaunchTasks, s *stepapi.StartSpec) { s.ConfFile = "/nonexistent/slurm.conf" }, "read /nonexistent/slurm.conf"},
		{"het step", good, func(l *slurmproto.LaunchTasks, _ *stepapi.StartSpec) { l.HetJobID = 8 }, "heterogeneous steps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := *launch
			spec := &stepapi.StartSpec{ConfFile: conf, SpoolDir: t.TempDir(), TmpFS: t.TempDir()}
			if c.edit != nil {
				c.edit(&l, spec)
			}
			h, err := newHost(&stepd.MPIStep{Spec: spec, Launch: &l, NodeID: 0, GTIDs: []uint32{0}, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Log: hclog.NewNullLogger()})
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
