// Package metrics owns the daemon's Prometheus telemetry: the HTTP server
// that serves /metrics (and the probes other packages add to it), the
// per-GPU series under dcgm-exporter's names labelled with the job, step
// and user holding each GPU, per-job GPU accounting (allocated versus used
// GPU-seconds, idle allocated GPUs), and the daemon's own RPC, connection
// and step counters.
//
// It consumes narrow interfaces so that it can be tested alone:
//
//	Sampler     reads the GPUs (internal/gpu implements it over NVML)
//	Holders     which job/step/user holds each GPU (Registry, fed by the step launches)
//	ConnSource  the RPC server's connection counters
//	StepLister  the node's live steps
//
// and the RPC layer calls RPC.Observe (internal/rpc's Observer) once per
// request, off the event loop.
//
//	Run: every SampleInterval ─▶ Sampler.Sample ─▶ cache ─▶ account GPU-seconds per job
//	                          └─▶ StepLister.Steps ─▶ cache ─▶ Registry.Prune
//	scrape ─▶ Collect: the cached samples and the accounts as const metrics
//
// Series exist only while what they describe does: a GPU's job labels
// change with its holder, a finished job's accounts are dropped after
// FinishedJobLinger, and at most MaxJobs jobs are accounted at once.
package metrics
