package main

import (
	"testing"

	"github.com/tiee-hpc/tiee/bench/internal/launch"
)

// Each stack's results go to their own directory, so a 24.11 run never overwrites the
// 22.05 results; -out wins.
func TestOutDir(t *testing.T) {
	s2411 := launch.Stack{Release: launch.Release2411, Auth: launch.AuthSlurm}
	for _, c := range []struct {
		out, profile string
		stack        launch.Stack
		want         string
	}{
		{"", "full", launch.DefaultStack, "bench/results/latest"},
		{"", "smoke", launch.DefaultStack, "bench/results/smoke"},
		{"", "full", s2411, "bench/results/latest-24.11-slurm"},
		{"", "smoke", s2411, "bench/results/smoke-24.11-slurm"},
		{"/tmp/x", "full", s2411, "/tmp/x"},
	} {
		if got := outDir(c.out, c.profile, c.stack); got != c.want {
			t.Errorf("outDir(%q, %s, %s) = %q, want %q", c.out, c.profile, c.stack, got, c.want)
		}
	}
}
