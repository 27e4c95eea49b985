package sack

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// DefaultClientTimeout bounds one client request: connect, send, answer.
const DefaultClientTimeout = 10 * time.Second

// EnvSocket is 26.05's SLURM_SACK_SOCKET: when set, the only path a client
// tries.
const EnvSocket = "SLURM_SACK_SOCKET"

// ErrNoSocket: no path in the list accepted a connection (stock: "failed
// to connect to any sack sockets").
var ErrNoSocket = errors.New("sack: failed to connect to any sack sockets")

// ErrRefused: the server answered VERIFY with a failure, or closed the
// connection without answering (26.05 does that for a bad token, and both
// releases for a bad CREATE).
var ErrRefused = errors.New("sack: request refused")

// Paths2411 are the sockets a 24.11 client tries, in order.
func Paths2411() []string { return []string{DefaultSocket, SlurmctldSocket, SlurmdbdSocket} }

// Paths2605 are the sockets a 26.05 client tries: $SLURM_SACK_SOCKET alone
// when set, else /run/slurm-<cluster>/sack.socket (when cluster is not
// ""), then the 24.11 paths.
func Paths2605(cluster string, getenv func(string) string) []string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if p := getenv(EnvSocket); p != "" {
		return []string{p}
	}
	var paths []string
	if cluster != "" {
		paths = append(paths, "/run/slurm-"+cluster+"/sack.socket")
	}
	return append(paths, Paths2411()...)
}

// Client asks a SACK server for tokens, as srun, scontrol and a 24.11
// slurmstepd do. The zero value is not usable: set Paths and Version.
// Safe for concurrent use.
type Client struct {
	Paths   []string      // tried in order (Paths2411, Paths2605)
	Version uint16        // the request's version field (the client's release)
	Timeout time.Duration // per request; 0 means DefaultClientTimeout
}

// Create asks for a "sack" token readable by ruid carrying data (stock
// sack_create).
func (c *Client) Create(ctx context.Context, ruid uint32, data []byte) (string, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	if _, err := conn.Write(CreateRequest(c.Version, ruid, data)); err != nil {
		return "", fmt.Errorf("sack: create: send: %w", err)
	}
	var n [4]byte
	if _, err := io.ReadFull(conn, n[:]); err != nil {
		return "", fmt.Errorf("%w: create: no token (%w)", ErrRefused, err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size == 0 {
		return "", fmt.Errorf("%w: create: empty token", ErrRefused)
	}
	if size > MaxRequest {
		return "", fmt.Errorf("%w: create: token of %d bytes", ErrMalformed, size)
	}
	tok := make([]byte, size)
	if _, err := io.ReadFull(conn, tok); err != nil {
		return "", fmt.Errorf("sack: create: token cut short: %w", err)
	}
	s, _, err := unpackstr(append(n[:], tok...))
	if err != nil {
		return "", fmt.Errorf("%w: create: %w", ErrMalformed, err)
	}
	return s, nil
}

// Verify asks the server to check token for this process (stock
// sack_verify). nil means the server answered SLURM_SUCCESS.
func (c *Client) Verify(ctx context.Context, token string) error {
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	if _, err := conn.Write(VerifyRequest(c.Version, token)); err != nil {
		return fmt.Errorf("sack: verify: send: %w", err)
	}
	var rc [4]byte
	if _, err := io.ReadFull(conn, rc[:]); err != nil {
		return fmt.Errorf("%w: verify: no answer (%w)", ErrRefused, err)
	}
	if v := binary.BigEndian.Uint32(rc[:]); v != 0 {
		return fmt.Errorf("%w: verify: rc %d", ErrRefused, int32(v))
	}
	return nil
}

// dial connects to the first path that accepts, with the request deadline
// set on the connection.
func (c *Client) dial(ctx context.Context) (*net.UnixConn, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultClientTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var d net.Dialer
	var errs []error
	for _, p := range c.Paths {
		conn, err := d.DialContext(ctx, "unix", p)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		uc := conn.(*net.UnixConn)
		_ = uc.SetDeadline(deadline)
		return uc, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrNoSocket, errors.Join(errs...))
}
