// Package scenarios holds the bench's scenarios and the registry that runs them in order.
// A scenario measures something on the running bench cluster (Env) and appends raw figures to
// Env.Res; it never computes verdicts (the report does, from results.json).
//
// Adding a scenario: implement Scenario, put it in Registry where it should run (order
// matters: memory is measured before the load sweeps, the open loop needs stock's best
// closed-loop rate), and store its figures in a results field or in Env.Res.Extra under its
// Name. A scenario that cannot run yet on slurmd-go returns an error wrapping
// ErrNotMeasuredYet, which the report shows as "not measured yet" with the reason; it is never
// replaced by an estimate.
package scenarios

import (
	"errors"
	"fmt"
	"time"

	"github.com/tiee-hpc/tiee/bench/internal/procstat"
	"github.com/tiee-hpc/tiee/bench/internal/results"
)

// Scenario is one measurement.
type Scenario interface {
	// Name is the stable key in results.json (kebab-case).
	Name() string
	// Title is the human name in reports.
	Title() string
	// Run measures and appends to env.Res. It returns an error wrapping ErrNotMeasuredYet when
	// what it measures does not exist yet, and any other error when it failed.
	Run(env *Env) error
}

// ErrNotMeasuredYet marks a scenario whose subject is not implemented yet.
var ErrNotMeasuredYet = errors.New("not measured yet")

// ErrNotApplicable marks a scenario whose subject does not exist in the run's stack (munged
// under auth/slurm); the error says why.
var ErrNotApplicable = errors.New("not applicable")

// Registry is every scenario, in run order.
var Registry = []Scenario{
	mungeRate{},
	tokenRate{},
	idle{when: "start"},
	hold{},
	closedLoop{msg: msgPing},
	closedLoop{msg: msgStatus},
	openLoop{},
	idle{when: "after-load"},
	jobThroughput{},
	srunLaunch{},
	stepdRSS{},
	mpiStartup{},
}

// RunAll runs every scenario of Registry (or only those named in only, if not empty),
// recording each one's status. A failed scenario does not stop the others.
func RunAll(env *Env, only map[string]bool) {
	for _, s := range Registry {
		if len(only) > 0 && !only[s.Name()] {
			continue
		}
		if env.Ctx.Err() != nil {
			env.Res.Status = append(env.Res.Status, results.ScenarioStatus{Name: s.Name(), Title: s.Title(),
				Status: results.StatusFailed, Note: "interrupted"})
			continue
		}
		env.Logf("scenario %s: %s", s.Name(), s.Title())
		load := procstat.LoadAvg1()
		t0 := time.Now()
		err := s.Run(env)
		st := results.ScenarioStatus{Name: s.Name(), Title: s.Title(), Status: results.StatusMeasured,
			Seconds: time.Since(t0).Seconds(), LoadAvg1: load}
		switch {
		case errors.Is(err, ErrNotMeasuredYet):
			st.Status = results.StatusNotMeasured
			st.Note = err.Error()
		case errors.Is(err, ErrNotApplicable):
			st.Status = results.StatusNotApplicable
			st.Note = err.Error()
			env.Logf("  %v", err)
		case err != nil:
			st.Status = results.StatusFailed
			st.Note = err.Error()
			if env.Res.Errors == nil {
				env.Res.Errors = map[string][]string{}
			}
			env.Res.Errors[s.Name()] = append(env.Res.Errors[s.Name()], err.Error())
			env.Logf("scenario %s FAILED: %v", s.Name(), err)
		}
		env.Res.Status = append(env.Res.Status, st)
	}
}

// planned is a scenario whose subject slurmd-go does not have yet. It measures nothing and
// says so; the issue that brings the subject replaces it with a real scenario.
type planned struct{ name, title, needs string }

func (p planned) Name() string  { return p.name }
func (p planned) Title() string { return p.title }
func (p planned) Run(*Env) error {
	return fmt.Errorf("%w: needs %s", ErrNotMeasuredYet, p.needs)
}
