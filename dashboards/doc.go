// Package dashboards ships the Grafana dashboards of slurmd-go's metrics
// (slurmd-go.json, import it into Grafana with a Prometheus data source)
// and reads their panel queries, for the tests that check them against
// the metrics the daemon exports and against a real Prometheus.
package dashboards
