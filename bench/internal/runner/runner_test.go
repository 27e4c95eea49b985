package runner

import (
	"slices"
	"testing"

	"github.com/tiee-hpc/tiee/bench/internal/launch"
)

// The stock slurmd and slurmd-go (gnet) each get 3 extra nodes of their own kind, run like
// their daemon; slurmd-go with plain net gets none.
func TestNodeSpecs(t *testing.T) {
	specs := nodeSpecs()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	want := []string{"bstock", "bgo", "bgonet", "bstock2", "bstock3", "bstock4", "bgo2", "bgo3", "bgo4"}
	if !slices.Equal(names, want) {
		t.Fatalf("nodes %v, want %v", names, want)
	}
	for _, s := range specs[3:] {
		of := specs[0]
		if s.Of == nodeGo {
			of = specs[1]
		}
		if s.Of != of.Name || s.Impl != of.Impl || !slices.Equal(s.Env, of.Env) {
			t.Errorf("%s: %+v, want an extra node like %+v", s.Name, s, of)
		}
	}
	if specs[1].Impl != launch.ImplGo || specs[0].Of != "" {
		t.Fatalf("%+v", specs[:3])
	}
}
