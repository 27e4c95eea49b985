//go:build linux

package stepd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/stepapi"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

type scriptedCtld struct {
	replies []any // error or uint32 rc, one per call; the last repeats
	calls   []*slurmproto.CompleteBatchScript
	uids    []uint32
}

func (s *scriptedCtld) Call(_ context.Context, b slurmproto.Body, uid uint32) (slurmproto.Body, error) {
	s.calls = append(s.calls, b.(*slurmproto.CompleteBatchScript))
	s.uids = append(s.uids, uid)
	r := s.replies[min(len(s.calls), len(s.replies))-1]
	if err, ok := r.(error); ok {
		return nil, err
	}
	return &slurmproto.ReturnCode{RC: r.(uint32)}, nil
}

func TestSendComplete_Retries(t *testing.T) {
	down := errors.New("connection refused")
	for _, tc := range []struct {
		name    string
		replies []any
		calls   int
		ok      bool
	}{
		{"acknowledged", []any{uint32(0)}, 1, true},
		{"retried until an answer", []any{down, down, uint32(0)}, 3, true},
		{"already done counts as success", []any{down, uint32(slurmproto.ESlurmAlreadyDone)}, 2, true},
		{"invalid job id counts as success", []any{uint32(slurmproto.ESlurmInvalidJobID)}, 1, true},
		{"a refusal is not retried", []any{uint32(slurmproto.ESlurmAccessDenied)}, 1, false},
		{"gives up after the schedule", []any{down}, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctld := &scriptedCtld{replies: tc.replies}
			s := &Step{
				spec: &stepapi.StartSpec{NodeName: "n3", CtldHosts: []string{"x"}},
				opts: Options{Ctld: ctld, CompleteRetry: RetrySchedule{Attempts: 4, Delay: time.Millisecond}},
				log:  hclog.NewNullLogger(),
				id:   slurmproto.StepID{JobID: 5, StepID: slurmproto.StepIDBatch},
				uid:  1001,
			}
			err := s.sendComplete(0x300, 0)
			if (err == nil) != tc.ok || len(ctld.calls) != tc.calls {
				t.Fatalf("err %v after %d calls, want ok=%v after %d", err, len(ctld.calls), tc.ok, tc.calls)
			}
			c := ctld.calls[0]
			if *c != (slurmproto.CompleteBatchScript{JobID: 5, StepID: s.id, JobRC: 0x300, UserID: 1001, NodeName: "n3"}) || ctld.uids[0] != auth.UIDAny {
				t.Errorf("sent %+v to uid %d", c, ctld.uids[0])
			}
		})
	}
	if CompleteBatchRetry.Attempts != 241 || CompleteBatchRetry.Delay != 15*time.Second {
		t.Errorf("stock schedule is 240 retries every 15 s: %+v", CompleteBatchRetry)
	}
}
