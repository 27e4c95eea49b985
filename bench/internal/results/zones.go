package results

import (
	"github.com/tiee-hpc/tiee/bench/internal/launch"
)

// ZonesSchemaVersion is bumped when a field of Zones changes meaning.
const ZonesSchemaVersion = 1

// Placements of a zone step.
const (
	PlacementOneZone  = "one-zone"  // srun --topology=zone: slurmctld keeps the job in one zone
	PlacementTwoZones = "two-zones" // the nodes slurmctld picks without it: both zones, interleaved
)

// Zones is one run of the zone bench (bench/zones): a data-parallel training step, a ring
// all-reduce between the tasks of a job on simulated network zones, placed in one zone or
// across two, for several added cross-zone delays; and the hard-block case, with and without
// the tiee_topology SPANK plugin. Its own file (bench/results/zones*/results.json), since it
// runs on the integration harness's zoned cluster, not on benchrun's stacks.
type Zones struct {
	Schema      int            `json:"schema"`
	Profile     string         `json:"profile"` // "full" or "smoke"
	Started     string         `json:"started"`
	Finished    string         `json:"finished"`
	WallSeconds float64        `json:"wall_s"`
	Release     string         `json:"release"` // slurmctld's, the clients' (the host's)
	Machine     launch.Machine `json:"machine"`
	Config      ZonesConfig    `json:"config"`
	Steps       []ZoneStep     `json:"steps"`
	Block       []ZoneBlock    `json:"block"`
	Notes       []string       `json:"notes,omitempty"`
}

// ZonesConfig is what every step of the run shared.
type ZonesConfig struct {
	Nodes           []string  `json:"nodes"` // the cluster's nodes, in slurm.conf order
	Zones           []string  `json:"zones"` // each node's zone, same order
	Ranks           int       `json:"ranks"` // tasks per job, one per node
	Bytes           int       `json:"bytes"` // the gradient all-reduced per step
	Warmup          int       `json:"warmup"`
	Iters           int       `json:"iters"` // timed steps per job
	DelaysMS        []float64 `json:"delays_ms"`
	DelayModel      string    `json:"delay_model"`
	ConnectTimeoutS float64   `json:"connect_timeout_s"` // the all-reduce's own bound on reaching a peer
	ProbeTimeoutS   float64   `json:"probe_timeout_s"`   // the plugin's bound on one reachability probe
	FailBoundS      float64   `json:"fail_bound_s"`      // the bound on a blocked job with the plugin
}

// ZoneStep is one job of Iters timed all-reduce steps at one added delay and placement.
type ZoneStep struct {
	Placement string    `json:"placement"`
	DelayMS   float64   `json:"delay_ms"` // added to each packet routed between zones, each way
	RTTms     float64   `json:"rtt_ms"`   // measured cross-zone TCP connect time (median), 0 for one zone
	Nodes     []string  `json:"nodes"`    // rank order
	Zones     []string  `json:"zones"`    // of those nodes
	StepsS    []float64 `json:"steps_s"`
	MedianS   float64   `json:"median_s"`
	MinS      float64   `json:"min_s"`
	MaxS      float64   `json:"max_s"`
}

// ZoneBlock is the hard-block case: a job whose nodes straddle zones that drop each other's
// packets, with or without the plugin; how long it held its nodes before it failed.
type ZoneBlock struct {
	Plugin    bool     `json:"plugin"`
	HeldS     float64  `json:"held_s"` // srun's start to its exit: the nodes were the job's
	ExitCode  int      `json:"exit_code"`
	Message   string   `json:"message"` // the line that says why
	Nodes     []string `json:"nodes"`
	TasksLeft int      `json:"tasks_left"` // processes of the job still on the nodes after srun exited
}

// StepFor is the step of placement at delayMS (nil if none).
func (z *Zones) StepFor(placement string, delayMS float64) *ZoneStep {
	for i := range z.Steps {
		if s := &z.Steps[i]; s.Placement == placement && s.DelayMS == delayMS {
			return s
		}
	}
	return nil
}

// BlockFor is the hard-block run with or without the plugin (nil if none).
func (z *Zones) BlockFor(plugin bool) *ZoneBlock {
	for i := range z.Block {
		if z.Block[i].Plugin == plugin {
			return &z.Block[i]
		}
	}
	return nil
}

// LoadZones reads a zone bench's results.json.
func LoadZones(path string) (*Zones, error) {
	var z Zones
	if err := loadJSON(path, &z, func() (int, int) { return z.Schema, ZonesSchemaVersion }); err != nil {
		return nil, err
	}
	return &z, nil
}

// Save writes z to path (indented, atomically).
func (z *Zones) Save(path string) error { return saveJSON(path, z) }
