package metrics

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Holder is the job, step and user holding a GPU.
type Holder struct {
	JobID uint32
	Step  string // "batch", "extern", "interactive" or the step number
	User  string
}

func (h Holder) jobLabel() string {
	if h.JobID == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(h.JobID), 10)
}

// Holders answers which jobs hold each GPU. Any goroutine.
type Holders interface {
	// Holders maps a GPU's minor number to the jobs holding it, one entry
	// per job (several only for shared GPUs), sorted by job id.
	Holders() map[int][]Holder
}

// StepStart is one step launched on the node with the GPUs it was given.
type StepStart struct {
	JobID  uint32
	StepID uint32 // slurmproto.StepIDBatch, StepIDExtern, … or the step number
	User   string
	// GPUs are the minor numbers (/dev/nvidia<minor>) of the step's GPUs,
	// as the credential's GRES allocation gives them.
	GPUs []int
}

// StepName is a step id as Slurm prints it ("batch", "extern", "3").
func StepName(id uint32) string {
	switch id {
	case slurmproto.StepIDBatch:
		return "batch"
	case slurmproto.StepIDExtern:
		return "extern"
	case slurmproto.StepIDInteractive:
		return "interactive"
	}
	return strconv.FormatUint(uint64(id), 10)
}

// DefaultMaxJobs bounds the jobs Registry and the per-job accounts keep:
// the label cardinality of the per-job series.
const DefaultMaxJobs = 512

// PruneGrace keeps a launched step that the node does not list yet (its
// step manager is still starting) from being pruned.
const PruneGrace = 30 * time.Second

// Registry is the simple Holders the step launches feed: jobmgr calls
// StepStarted for each launched step with its GPUs and JobEnded when the
// job ends here; Prune drops steps no longer running. At most MaxJobs jobs
// are held; more are counted in Dropped and not labelled. Any goroutine.
type Registry struct {
	max int
	now func() time.Time

	mu      sync.Mutex
	jobs    map[uint32]*heldJob // guarded by mu
	dropped uint64              // guarded by mu
	started uint64              // guarded by mu: steps registered
}

type heldJob struct {
	user  string
	steps map[uint32]heldStep
}

type heldStep struct {
	gpus    []int
	started time.Time
	seq     uint64 // start order: the latest step names a GPU's holder
}

// NewRegistry holds at most maxJobs jobs (DefaultMaxJobs if ≤ 0).
func NewRegistry(maxJobs int) *Registry {
	if maxJobs <= 0 {
		maxJobs = DefaultMaxJobs
	}
	return &Registry{max: maxJobs, now: time.Now, jobs: make(map[uint32]*heldJob)}
}

// StepStarted records a launched step.
func (r *Registry) StepStarted(s StepStart) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[s.JobID]
	if j == nil {
		if len(r.jobs) >= r.max {
			r.dropped++
			return
		}
		j = &heldJob{steps: make(map[uint32]heldStep)}
		r.jobs[s.JobID] = j
	}
	if s.User != "" {
		j.user = s.User
	}
	r.started++
	j.steps[s.StepID] = heldStep{gpus: slices.Clone(s.GPUs), started: r.now(), seq: r.started}
}

// StepEnded forgets one step.
func (r *Registry) StepEnded(jobID, stepID uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j := r.jobs[jobID]; j != nil {
		delete(j.steps, stepID)
		if len(j.steps) == 0 {
			delete(r.jobs, jobID)
		}
	}
}

// JobEnded forgets a job and its steps.
func (r *Registry) JobEnded(jobID uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, jobID)
}

// Prune forgets the steps that are not in live (the node's running steps)
// and were started more than PruneGrace ago: a step whose end the daemon
// did not see (its step manager reports to slurmctld directly).
func (r *Registry) Prune(live []slurmproto.StepID) {
	type key struct{ job, step uint32 }
	alive := make(map[key]bool, len(live))
	for _, s := range live {
		alive[key{s.JobID, s.StepID}] = true
	}
	cut := r.now().Add(-PruneGrace)
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, j := range r.jobs {
		for sid, s := range j.steps {
			if !alive[key{id, sid}] && s.started.Before(cut) {
				delete(j.steps, sid)
			}
		}
		if len(j.steps) == 0 {
			delete(r.jobs, id)
		}
	}
}

// Dropped is how many jobs were not held because MaxJobs were.
func (r *Registry) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// Holders implements Holders: for each GPU, each job holding it, named by
// its latest started step that has the GPU.
func (r *Registry) Holders() map[int][]Holder {
	r.mu.Lock()
	defer r.mu.Unlock()
	type pick struct {
		step uint32
		seq  uint64
	}
	by := make(map[int]map[uint32]pick)
	for id, j := range r.jobs {
		for sid, s := range j.steps {
			for _, g := range s.gpus {
				m := by[g]
				if m == nil {
					m = make(map[uint32]pick)
					by[g] = m
				}
				if p, ok := m[id]; !ok || s.seq > p.seq {
					m[id] = pick{sid, s.seq}
				}
			}
		}
	}
	out := make(map[int][]Holder, len(by))
	for g, m := range by {
		hs := make([]Holder, 0, len(m))
		for id, p := range m {
			hs = append(hs, Holder{JobID: id, Step: StepName(p.step), User: r.jobs[id].user})
		}
		slices.SortFunc(hs, func(a, b Holder) int { return cmp.Compare(a.JobID, b.JobID) })
		out[g] = hs
	}
	return out
}

var _ Holders = (*Registry)(nil)
