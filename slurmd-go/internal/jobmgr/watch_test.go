package jobmgr

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/config"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/gres"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

type launched struct {
	job, step uint32
	user      string
	gpus      []int
}

type watchRec struct {
	launched []launched
	ended    []uint32
}

func (w *watchRec) StepLaunched(job, step uint32, user string, gpus []int) {
	w.launched = append(w.launched, launched{job, step, user, gpus})
}
func (w *watchRec) JobEnded(job uint32) { w.ended = append(w.ended, job) }

func bitmap(n int, set ...int) *slurmproto.Bitmap {
	b := slurmproto.NewBitmap(n)
	for _, i := range set {
		b.Set(i)
	}
	return b
}

// TestWatchLaunch_GPUs: the watcher hears each launched step with the
// minor numbers of the GPUs its credential gives this node (the batch
// step: the job's; an srun step: the step's; shards: their GPUs' files),
// and each job that ends here.
func TestWatchLaunch_GPUs(t *testing.T) {
	gresStat = func(path string) (gres.DevType, uint32, uint32, error) {
		var n uint32
		if _, err := fmt.Sscanf(filepath.Base(path), "nvidia%d", &n); err == nil {
			return gres.DevChar, 195, n, nil
		}
		return 0, 0, 0, gres.ErrNotDevice
	}
	t.Cleanup(func() { gresStat = nil })
	cfg := &config.Config{NodeName: "g2", Conf: &slurmconf.Config{GresTypes: []string{"gpu", "shard"}}}
	m := &Manager{cfg: func() *config.Config { return cfg }, jobs: map[uint32]*job{}}
	recs := []gres.Record{
		// Device files where a test keeps them; nvidiactl is no GPU.
		{Name: "gpu", Count: 4, File: "/tmp/dev/nvidia[4-7]", Flags: gres.Flags{HasFile: true, EnvNVML: true}},
		{Name: "shard", Count: 8, File: "/tmp/dev/nvidia[4-7]", Flags: gres.Flags{HasFile: true, Shared: true}},
	}
	m.SetGresRecords(func() []gres.Record { return recs })
	w := &watchRec{}
	m.SetStepWatcher(w)
	v := slurmproto.Version2205
	gpuID, shardID := slurmproto.GresBuildID("gpu"), slurmproto.GresBuildID("shard")
	// Job on g[1-2]: this node (index 1) holds its GPUs 1 and 3 (/dev/nvidia5, 7);
	// the step has GPU 3 only.
	cred := &slurmproto.Cred{JobHostlist: "g[1-2]",
		GresJobState: slurmproto.EncodeGresJobStates([]slurmproto.GresJobState{{PluginID: gpuID, NodeCnt: 2,
			CntNodeAlloc: []uint64{1, 2}, BitAlloc: []*slurmproto.Bitmap{bitmap(4, 0), bitmap(4, 1, 3)}}}, v),
		GresStepState: slurmproto.EncodeGresStepStates([]slurmproto.GresStepState{{PluginID: gpuID, NodeCnt: 2,
			NodeInUse: bitmap(2, 0, 1), CntNodeAlloc: []uint64{1, 1}, BitAlloc: []*slurmproto.Bitmap{bitmap(4, 0), bitmap(4, 3)}}}, v)}
	m.watchLaunch(v, cred, slurmproto.StepID{JobID: 40, StepID: slurmproto.StepIDBatch}, "alice", true)
	m.watchLaunch(v, cred, slurmproto.StepID{JobID: 40, StepID: 0}, "alice", false)
	// A shard job on this node alone: its shards are on GPU 2 (/dev/nvidia6).
	shard := &slurmproto.Cred{JobHostlist: "g2",
		GresJobState: slurmproto.EncodeGresJobStates([]slurmproto.GresJobState{{PluginID: shardID, NodeCnt: 1,
			CntNodeAlloc: []uint64{2}, BitAlloc: []*slurmproto.Bitmap{bitmap(4, 2)}}}, v)}
	m.watchLaunch(v, shard, slurmproto.StepID{JobID: 41, StepID: slurmproto.StepIDBatch}, "bob", true)
	// No GRES at all.
	m.watchLaunch(v, &slurmproto.Cred{JobHostlist: "g2"}, slurmproto.StepID{JobID: 42, StepID: slurmproto.StepIDBatch}, "carol", true)
	m.forget(40)

	want := []launched{
		{40, slurmproto.StepIDBatch, "alice", []int{5, 7}},
		{40, 0, "alice", []int{7}},
		{41, slurmproto.StepIDBatch, "bob", []int{6}},
		{42, slurmproto.StepIDBatch, "carol", nil},
	}
	if len(w.launched) != len(want) {
		t.Fatalf("launched %+v, want %+v", w.launched, want)
	}
	for i, l := range w.launched {
		if l.job != want[i].job || l.step != want[i].step || l.user != want[i].user || !slices.Equal(l.gpus, want[i].gpus) {
			t.Errorf("launch %d: %+v, want %+v", i, l, want[i])
		}
	}
	if !slices.Equal(w.ended, []uint32{40}) {
		t.Errorf("ended %v, want [40]", w.ended)
	}
}
