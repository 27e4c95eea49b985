package pmix

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/fwddata"
)

// Stock's pmixp_server_send_nb sends with pmixp_p2p_send/pmixp_stepd_send
// (500 ms start delay, 7 tries, the delay doubling): the step managers of a
// step start in parallel, so a fast node's fence contribution or direct
// modex request can reach a node whose PMIx socket is not listening yet.
const (
	sendStartDelay = 500 * time.Millisecond
	sendTries      = 7
)

// retrySender retries a failed Send with stock's schedule, to the nodes
// that failed only (an *fwddata.Error names them), so that a node never
// receives one message twice. ctx bounds the whole.
type retrySender struct {
	Sender
	log   hclog.Logger
	delay time.Duration // first wait; doubled after each try
	tries int
}

func newRetrySender(s Sender, log hclog.Logger) retrySender {
	return retrySender{Sender: s, log: log, delay: sendStartDelay, tries: sendTries}
}

func (r retrySender) Send(ctx context.Context, nodes []string, address string, data []byte) error {
	delay := r.delay
	for try := 1; ; try++ {
		err := r.Sender.Send(ctx, nodes, address, data)
		if err == nil {
			return nil
		}
		var fe *fwddata.Error
		if errors.As(err, &fe) && len(fe.Nodes) > 0 {
			nodes = fe.Nodes
		}
		if try >= r.tries {
			return fmt.Errorf("send failed, exceeded the retry limit (%d tries): %w", r.tries, err)
		}
		r.log.Debug("send failed, retrying", "try", try, "nodes", nodes, "delay", delay, "error", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("send failed after %d tries: %w (%w)", try, err, ctx.Err())
		case <-t.C:
		}
		delay *= 2
	}
}
