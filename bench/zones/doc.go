// Package zones is the zone bench (issue 15, part 4): on the integration harness's
// simulated network zones (cluster.Options.Zones: a network namespace per node, a bridge
// per zone, routed between zones through the root namespace), a data-parallel training
// step — bench/cmd/allreduce, a ring all-reduce of a fixed gradient over TCP between a
// job's tasks — placed inside one zone (srun --topology=zone with the tiee_topology SPANK
// plugin and job_submit.lua) or across two (the nodes slurmctld picks without it), for
// several added cross-zone delays; and the hard-block case (a drop rule between the zones):
// how long a straddling job holds its nodes with the plugin and without it.
//
// It is a test binary (build tag integration, TestZoneBench) because the harness is, and
// it writes bench/results/zones/results.json (smoke: bench/results/smoke-zones), whose
// tables, plot and RFC block bench/internal/report renders (RenderZones). It measures and
// records; the only things it fails on are a job that did not run or did not fail as
// the case requires, never a time.
package zones
