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
		if got := outDir(c.out, c.profile, c.stack, nil); got != c.want {
			t.Errorf("outDir(%q, %s, %s) = %q, want %q", c.out, c.profile, c.stack, got, c.want)
		}
	}
	// A partial run has its own directory: it never replaces a complete run's results.
	only := selection(" srun-launch,mpi-startup ")
	for _, c := range []struct {
		profile string
		stack   launch.Stack
		want    string
	}{
		{"full", launch.DefaultStack, "bench/results/mpi-startup+srun-launch"},
		{"smoke", launch.DefaultStack, "bench/results/smoke-mpi-startup+srun-launch"},
		{"full", s2411, "bench/results/mpi-startup+srun-launch-24.11-slurm"},
	} {
		if got := outDir("", c.profile, c.stack, only); got != c.want {
			t.Errorf("outDir(-only %v, %s, %s) = %q, want %q", only, c.profile, c.stack, got, c.want)
		}
	}
	if got := outDir("/tmp/x", "full", s2411, only); got != "/tmp/x" {
		t.Errorf("-out with -only: %q", got)
	}
}
