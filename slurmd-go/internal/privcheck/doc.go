// Package privcheck finds, before the daemon takes a job, which privileges
// the configuration needs and the process lacks: Linux capabilities
// (a pod in the chart's unprivileged mode holds only those it lists) and a
// writable cgroup hierarchy (cgroup v2 delegated to the pod, or v1
// mounted read-write). Each missing one is named with what needs it, so a
// pod fails at start with the reason instead of failing jobs later.
package privcheck
