package pmix

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/fwddata"
)

// flaky fails each node in failFor for its first n tries, as a slurmd does
// while the step manager's socket there is not listening yet.
type flaky struct {
	failFor map[string]int
	calls   []string
}

func (f *flaky) Send(_ context.Context, nodes []string, _ string, _ []byte) error {
	f.calls = append(f.calls, strings.Join(nodes, ","))
	fe := &fwddata.Error{Errs: map[string]error{}}
	for _, n := range nodes {
		if f.failFor[n] > 0 {
			f.failFor[n]--
			fe.Nodes = append(fe.Nodes, n)
			fe.Errs[n] = syscall.ENOENT
		}
	}
	if len(fe.Nodes) == 0 {
		return nil
	}
	return fe
}

func TestRetrySender_ResendsToFailedNodesOnly(t *testing.T) {
	f := &flaky{failFor: map[string]int{"b": 2, "c": 1}}
	r := retrySender{Sender: f, log: hclog.NewNullLogger(), delay: time.Millisecond, tries: sendTries}
	if err := r.Send(context.Background(), []string{"a", "b", "c"}, "/x", []byte("m")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.calls, " "); got != "a,b,c b,c b" {
		t.Fatalf("sends %q, want every node once, then the failed ones", got)
	}
}

func TestRetrySender_GivesUpAfterStockTries(t *testing.T) {
	f := &flaky{failFor: map[string]int{"b": 100}}
	r := retrySender{Sender: f, log: hclog.NewNullLogger(), delay: time.Millisecond, tries: sendTries}
	err := r.Send(context.Background(), []string{"a", "b"}, "/x", nil)
	if !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "retry limit") {
		t.Fatalf("error %v, want the node's cause and the retry limit", err)
	}
	if len(f.calls) != sendTries {
		t.Fatalf("%d tries, want %d", len(f.calls), sendTries)
	}
}

func TestRetrySender_BoundedByContext(t *testing.T) {
	f := &flaky{failFor: map[string]int{"b": 100}}
	r := newRetrySender(f, hclog.NewNullLogger()) // stock's 500 ms first delay
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.Send(ctx, []string{"b"}, "/x", nil)
	if !errors.Is(err, context.DeadlineExceeded) || len(f.calls) != 1 {
		t.Fatalf("error %v after %d tries, want the deadline after the first", err, len(f.calls))
	}
}
