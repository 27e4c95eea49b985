package rpc

import (
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Observer learns of every request the dispatcher served (internal/metrics
// implements it). ObserveRPC runs on the worker that served the request,
// after its reply is built, never on an event loop; it must be cheap and
// must not block.
type Observer interface {
	ObserveRPC(Observation)
}

// Result is how a request ended, a small fixed set (a metric label).
type Result string

// The results of a request.
const (
	ResultOK          Result = "ok"          // served; the reply is no error code
	ResultError       Result = "error"       // served; the reply is a non-zero RESPONSE_SLURM_RC
	ResultMalformed   Result = "malformed"   // header or body did not decode
	ResultAuth        Result = "auth"        // credential or body hash refused
	ResultUnsupported Result = "unsupported" // a type this node does not serve in this release
	ResultDenied      Result = "denied"      // a privileged request from another user
)

// Observation is one served request.
type Observation struct {
	Version uint16             // the header's protocol version (0: the header did not decode)
	MsgType slurmproto.MsgType // 0 when the header did not decode
	Result  Result
	Elapsed time.Duration // from the frame's dispatch to its reply built (forwards included)
}

// set records the result; the first failure wins. o may be nil (no observer).
func (o *Observation) set(r Result) {
	if o != nil && o.Result == ResultOK {
		o.Result = r
	}
}
