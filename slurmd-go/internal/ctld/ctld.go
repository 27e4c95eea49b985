// Package ctld is the daemon's client of slurmctld: one request, one reply,
// signed and verified with munge, tried against each SlurmctldHost in turn.
package ctld

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// ConnectTimeout bounds one dial to a controller.
const ConnectTimeout = 5 * time.Second

// Config says where slurmctld is and how long to wait for it.
type Config struct {
	// Hosts are "host:port" of SlurmctldHost entries, primary first.
	Hosts []string
	// MessageTimeout bounds one request/reply exchange (MessageTimeout).
	MessageTimeout time.Duration
	HashPolicy     auth.HashPolicy
	MaxFrame       uint32
}

// Client talks to slurmctld. Safe for concurrent use.
type Client struct {
	auth auth.Authenticator
	cfg  func() Config
	log  hclog.Logger
}

// New returns a client; cfg is read per call so reconfigure takes effect.
func New(a auth.Authenticator, cfg func() Config, log hclog.Logger) *Client {
	return &Client{auth: a, cfg: cfg, log: log.Named("ctld")}
}

// ErrNoController is returned when no SlurmctldHost answered.
var ErrNoController = errors.New("ctld: no controller answered")

// Call sends body with the credential restricted to restrictUID
// (auth.UIDAny for request/response RPCs) and returns the decoded reply.
func (c *Client) Call(ctx context.Context, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error) {
	cfg := c.cfg()
	frame, err := c.encode(ctx, body, restrictUID)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, host := range cfg.Hosts {
		reply, err := c.exchange(ctx, cfg, host, frame, true)
		if err == nil {
			return reply, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrNoController, errors.Join(errs...))
}

// CallAddr sends body to one host:port that is not a controller (srun's
// response port, another node) and returns the decoded reply.
func (c *Client) CallAddr(ctx context.Context, host string, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error) {
	frame, err := c.encode(ctx, body, restrictUID)
	if err != nil {
		return nil, err
	}
	return c.exchange(ctx, c.cfg(), host, frame, true)
}

// Send delivers body without waiting for a reply (slurm_send_only_controller_msg).
func (c *Client) Send(ctx context.Context, body slurmproto.Body, restrictUID uint32) error {
	cfg := c.cfg()
	frame, err := c.encode(ctx, body, restrictUID)
	if err != nil {
		return err
	}
	var errs []error
	for _, host := range cfg.Hosts {
		if _, err := c.exchange(ctx, cfg, host, frame, false); err == nil {
			return nil
		} else {
			errs = append(errs, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrNoController, errors.Join(errs...))
}

func (c *Client) encode(ctx context.Context, body slurmproto.Body, restrictUID uint32) ([]byte, error) {
	b, err := slurmproto.EncodeBody(slurmproto.Version2205, body)
	if err != nil {
		return nil, fmt.Errorf("ctld: encode %s: %w", body.MsgType(), err)
	}
	t := body.MsgType()
	cred, err := c.auth.Encode(ctx, auth.Payload(slurmproto.Version2205, uint16(t), b, auth.HashK12), restrictUID)
	if err != nil {
		return nil, fmt.Errorf("ctld: sign %s: %w", t, err)
	}
	h := slurmproto.Header{Version: slurmproto.Version2205, MsgType: t}
	return slurmproto.EncodeMessage(h, slurmproto.AuthBlock{PluginID: slurmproto.AuthPluginMunge, Cred: cred}, b), nil
}

func (c *Client) exchange(ctx context.Context, cfg Config, host string, frame []byte, wantReply bool) (slurmproto.Body, error) {
	dctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ctld: connect %s: %w", host, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(cfg.MessageTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(frame); err != nil {
		return nil, fmt.Errorf("ctld: send to %s: %w", host, err)
	}
	if !wantReply {
		return nil, nil
	}
	rf, err := slurmproto.ReadFrame(conn, cfg.MaxFrame)
	if err != nil {
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	msg, err := slurmproto.DecodeMessage(rf)
	if err != nil {
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	cred, err := c.auth.Decode(ctx, msg.Auth.Cred)
	if err != nil {
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	if _, err := auth.CheckPayload(msg.Header.Version, uint16(msg.Header.MsgType), msg.Body, cred.Payload, cfg.HashPolicy); err != nil {
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	body, err := slurmproto.DecodeBody(msg.Header.Version, msg.Header.MsgType, msg.Body)
	if err != nil {
		return nil, fmt.Errorf("ctld: reply from %s: %w", host, err)
	}
	return body, nil
}
