package handlers

import (
	"context"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Jobs is what the job RPCs need from the job manager.
type Jobs interface {
	AcceptBatch(msg *slurmproto.BatchJobLaunch) uint32
	// StartBatch goes on with an accepted launch once its answer was sent
	// (replyErr nil) or could not be (the launch is aborted).
	StartBatch(version uint16, raw []byte, msg *slurmproto.BatchJobLaunch, replyErr error)
	LaunchProlog(version uint16, raw []byte, msg *slurmproto.LaunchProlog)
	CallerID(ctx context.Context, req *slurmproto.NetworkCallerID, uid uint32, privileged bool) slurmproto.Body
	Terminate(req *slurmproto.KillJob, uid uint32) uint32
	Timelimit(req *slurmproto.KillJob, uid uint32)
	Abort(req *slurmproto.KillJob, uid uint32)
	SignalTasks(req *slurmproto.SignalTasks, uid uint32, privileged bool) uint32
	TerminateTasks(req *slurmproto.SignalTasks, uid uint32, privileged bool) uint32
	Notify(req *slurmproto.JobNotify, uid uint32, privileged bool)
	// Suspend checks a REQUEST_SUSPEND_INT and returns its rc and what to
	// run once the answer went out: stopping or continuing every step of
	// the job, in the background.
	Suspend(req *slurmproto.SuspendInt, uid uint32) (uint32, func())
	StepStat(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool) slurmproto.Body
	StepPids(ctx context.Context, id slurmproto.StepID, uid uint32, privileged bool) slurmproto.Body
	PidJob(ctx context.Context, pid uint32) slurmproto.Body
	Reattach(ctx context.Context, req *slurmproto.ReattachTasks, uid uint32, privileged bool, orig slurmproto.Addr) *slurmproto.ReattachTasksResponse
	// LaunchTasks returns the rc for srun and what to do once that answer was or was not
	// sent (credential record).
	LaunchTasks(ctx context.Context, version uint16, reqUID uint32, privileged bool, orig slurmproto.Addr, msg *slurmproto.LaunchTasks) (uint32, func(error))
}

// JobRoutes returns the routes of the batch-job RPCs. privileged tells
// whether a uid is root or SlurmUser (signals are also open to job owners).
func JobRoutes(j Jobs, privileged func(uid uint32) bool) rpc.Registry {
	return rpc.Registry{
		slurmproto.RequestBatchJobLaunch: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			m := req.Body.(*slurmproto.BatchJobLaunch)
			if rc := j.AcceptBatch(m); rc != 0 {
				return rpc.RC(rc), nil
			}
			// Reply now, launch in the background: Prolog may be slow and
			// slurmctld only waits MessageTimeout. As slurmd, launch only
			// once slurmctld has the answer.
			version, raw := req.Header.Version, req.RawBody
			rep := rpc.RC(0)
			rep.Sent = func(err error) { j.StartBatch(version, raw, m, err) }
			return rep, nil
		}},
		slurmproto.RequestLaunchTasks: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			// srun waits for the step manager: answered once it is ready.
			rc, sent := j.LaunchTasks(ctx, req.Header.Version, req.UID, privileged(req.UID), req.Orig, req.Body.(*slurmproto.LaunchTasks))
			if rc == slurmproto.ESlurmProtocolIncompletePacket {
				// Refused while unpacking (24.11+ credential signatures):
				// slurmd answers a malformed message, not a launch.
				return rpc.Reply{Body: slurmproto.ReturnCode{RC: rc}, Sent: sent}, nil
			}
			return rpc.Reply{Body: slurmproto.ReturnCodeMsg{RC: rc}, Sent: sent}, nil
		}},
		slurmproto.RequestJobStepStat: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			id := req.Body.(*slurmproto.StepIDMsg).StepID
			return rpc.Reply{Body: j.StepStat(ctx, id, req.UID, privileged(req.UID)), Copy: true}, nil
		}},
		slurmproto.RequestJobStepPids: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			id := req.Body.(*slurmproto.StepIDMsg).StepID
			return rpc.Reply{Body: j.StepPids(ctx, id, req.UID, privileged(req.UID)), Copy: true}, nil
		}},
		slurmproto.RequestJobID: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			// Open to every user, as stock: it names a job, nothing more.
			return rpc.Reply{Body: j.PidJob(ctx, req.Body.(*slurmproto.JobIDRequest).PID), Copy: true}, nil
		}},
		slurmproto.RequestNetworkCallerid: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			// Open to every user, as stock; the answer hides others' jobs.
			resp := j.CallerID(ctx, req.Body.(*slurmproto.NetworkCallerID), req.UID, privileged(req.UID))
			return rpc.Reply{Body: resp, Copy: true}, nil
		}},
		slurmproto.RequestReattachTasks: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			resp := j.Reattach(ctx, req.Body.(*slurmproto.ReattachTasks), req.UID, privileged(req.UID), req.Orig)
			return rpc.Reply{Body: resp, Copy: true}, nil
		}},
		slurmproto.RequestLaunchProlog: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			j.LaunchProlog(req.Header.Version, req.RawBody, req.Body.(*slurmproto.LaunchProlog))
			return rpc.RC(0), nil
		}},
		slurmproto.RequestTerminateJob: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			return rpc.RC(j.Terminate(req.Body.(*slurmproto.KillJob), req.UID)), nil
		}},
		slurmproto.RequestKillTimelimit: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			j.Timelimit(req.Body.(*slurmproto.KillJob), req.UID)
			return rpc.RC(0), nil
		}},
		slurmproto.RequestKillPreempted: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			j.Timelimit(req.Body.(*slurmproto.KillJob), req.UID)
			return rpc.RC(0), nil
		}},
		slurmproto.RequestAbortJob: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			j.Abort(req.Body.(*slurmproto.KillJob), req.UID)
			return rpc.RC(0), nil
		}},
		slurmproto.RequestSignalTasks: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			return rpc.RC(j.SignalTasks(req.Body.(*slurmproto.SignalTasks), req.UID, privileged(req.UID))), nil
		}},
		slurmproto.RequestTerminateTasks: {Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			return rpc.RC(j.TerminateTasks(req.Body.(*slurmproto.SignalTasks), req.UID, privileged(req.UID))), nil
		}},
		slurmproto.RequestSuspendInt: {Privileged: true, FromCtld: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			rc, start := j.Suspend(req.Body.(*slurmproto.SuspendInt), req.UID)
			if rc != 0 {
				return rpc.RC(rc), nil
			}
			// Answered at once, the work after the answer went (or could
			// not go) out, as _rpc_suspend_job: stopping the steps takes
			// seconds and slurmctld waits only MessageTimeout.
			rep := rpc.RC(0)
			rep.Sent = func(error) { start() }
			return rep, nil
		}},
		slurmproto.RequestJobNotify: {NoReplyType: true, Handle: func(ctx context.Context, req *rpc.Request) (rpc.Reply, error) {
			j.Notify(req.Body.(*slurmproto.JobNotify), req.UID, privileged(req.UID))
			return rpc.NoReply, nil
		}},
	}
}

// Merge joins registries; a type registered twice is a programming error.
func Merge(rs ...rpc.Registry) rpc.Registry {
	out := rpc.Registry{}
	for _, r := range rs {
		for t, route := range r {
			if _, dup := out[t]; dup {
				panic("handlers: " + t.String() + " registered twice")
			}
			out[t] = route
		}
	}
	return out
}
