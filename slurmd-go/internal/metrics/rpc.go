package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
)

// rpcBuckets span a ping answered from memory (sub-millisecond) to a
// launch that forwards down a tree and runs the Prolog (tens of seconds).
var rpcBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// RPC counts the daemon's requests by message type and result, and their
// latency. It implements rpc.Observer. Any goroutine.
type RPC struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newRPC(reg prometheus.Registerer) *RPC {
	r := &RPC{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "rpc_requests_total",
			Help: "Requests served, by Slurm message type and result (ok, error, malformed, auth, unsupported, denied).",
		}, []string{"msg_type", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "rpc_duration_seconds",
			Help:    "Time from a request's dispatch to its reply built (forwarding included), by Slurm message type.",
			Buckets: rpcBuckets,
		}, []string{"msg_type"}),
	}
	reg.MustRegister(r.requests, r.latency)
	return r
}

// ObserveRPC implements rpc.Observer.
func (r *RPC) ObserveRPC(o rpc.Observation) {
	t := msgTypeLabel(o)
	r.requests.WithLabelValues(t, string(o.Result)).Inc()
	r.latency.WithLabelValues(t).Observe(o.Elapsed.Seconds())
}

// msgTypeLabel is the type's name in its release; types no release
// defines share one label, so a peer sending random numbers cannot grow
// the series.
func msgTypeLabel(o rpc.Observation) string {
	switch {
	case o.Version == 0 && o.MsgType == 0:
		return "none" // the header did not decode
	case o.MsgType.KnownIn(o.Version):
		return o.MsgType.NameIn(o.Version)
	}
	return "other"
}

var _ rpc.Observer = (*RPC)(nil)
