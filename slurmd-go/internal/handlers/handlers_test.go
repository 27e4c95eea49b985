package handlers

import (
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TestRoutes_HaveLayouts: every request the daemon serves whose body has a
// layout in some release has one in each release the daemon speaks, so no
// handler is ever handed a body decoded with another release's layout, and
// no spoken release finds a served request it cannot read.
func TestRoutes_HaveLayouts(t *testing.T) {
	routes := Merge(NodeRoutes(nil), JobRoutes(nil, nil), ForwardDataRoutes(nil))
	if len(routes) < 20 {
		t.Fatalf("only %d routes", len(routes))
	}
	for typ := range routes {
		if !slurmproto.Registered(typ) {
			continue // no body (REQUEST_RECONFIGURE_WITH_CONFIG is read as a plain reconfigure)
		}
		for _, v := range slurmproto.Spoken() {
			if typ == slurmproto.RequestNodeHealthCheck && v != slurmproto.Version2605 {
				continue // 26.05's own RPC
			}
			if !slurmproto.HasBody(v, typ) {
				t.Errorf("%v has no layout in %s", typ, slurmproto.ReleaseName(v))
			}
		}
	}
	// What the daemon sends has a layout in every spoken release too.
	for _, typ := range []slurmproto.MsgType{
		slurmproto.MessageNodeRegistrationStatus, slurmproto.RequestCompleteProlog, slurmproto.MessageEpilogComplete,
		slurmproto.RequestCompleteBatchScript, slurmproto.RequestStepComplete, slurmproto.RequestJobRequeue,
		slurmproto.ResponseLaunchTasks, slurmproto.MessageTaskExit, slurmproto.ResponseSlurmdStatus,
		slurmproto.ResponsePingSlurmd, slurmproto.ResponseJobStepStat, slurmproto.ResponseJobStepPids,
		slurmproto.ResponseReattachTasks, slurmproto.ResponseJobID, slurmproto.ResponseAcctGatherUpdate,
		slurmproto.ResponseSlurmRC, slurmproto.ResponseSlurmRCMsg, slurmproto.RequestPing,
	} {
		for _, v := range slurmproto.Spoken() {
			if !slurmproto.HasBody(v, typ) {
				t.Errorf("%v (sent) has no layout in %s", typ, slurmproto.ReleaseName(v))
			}
		}
	}
}
