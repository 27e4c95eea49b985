package daemon

import (
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/bcast"
	"github.com/tiee-hpc/tiee/slurmd-go/internal/handlers"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// newBcast builds the sbcast server over the daemon's live config.
func (d *Daemon) newBcast() *bcast.Server {
	tokens, _ := d.auth.(bcast.TokenVerifier)
	return bcast.New(func() bcast.Config {
		cfg := d.config()
		return bcast.Config{NodeName: cfg.NodeName, Auth: d.auth, Tokens: tokens,
			SlurmUserUID: cfg.Conf.SlurmUserID, Started: time.Unix(0, d.started.Load())}
	}, d.log)
}

// bcastJobs drops a job's unfinished file transfers when the job ends
// (REQUEST_TERMINATE_JOB and REQUEST_ABORT_JOB), as stock does.
type bcastJobs struct {
	handlers.Jobs
	bcast *bcast.Server
}

func (j bcastJobs) Terminate(req *slurmproto.KillJob, uid uint32) uint32 {
	j.bcast.JobEnded(req.StepID.JobID)
	return j.Jobs.Terminate(req, uid)
}

func (j bcastJobs) Abort(req *slurmproto.KillJob, uid uint32) {
	j.bcast.JobEnded(req.StepID.JobID)
	j.Jobs.Abort(req, uid)
}
