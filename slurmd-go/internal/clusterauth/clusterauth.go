// Package clusterauth builds the auth plugin slurm.conf's AuthType names,
// for the daemon and for its step managers: auth/munge (munged's socket)
// or auth/slurm (the shared slurm.key or slurm.jwks). It owns nothing else:
// the plugins themselves are pkg/auth/munge and pkg/auth/authslurm.
package clusterauth

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/munge"
)

// AuthType values (slurm.conf AuthType).
const (
	Munge = "auth/munge"
	Slurm = "auth/slurm"
)

// Options are the slurm.conf values an auth plugin is built from.
type Options struct {
	AuthType    string // "" means auth/munge, Slurm's default
	ConfFile    string // slurm.conf: auth/slurm's keys are beside it
	ClusterName string // the "cluster" claim of auth/slurm tokens
	Hostname    string // the "host" claim ("" = this host)
	// AuthInfo values: munged's socket and credential TTL, and auth/slurm's
	// token TTL (ttl= serves both, as in Slurm).
	MungeSocket string
	TTL         int
	// AllowReplay accepts munge replays (several slurmds share a munged).
	AllowReplay bool
	SlurmUserID uint32
	// Version is the protocol version for auth/slurm's "ver" claim.
	Version func() uint16
	Logger  hclog.Logger
}

// New returns the cluster's authenticator. For auth/slurm it also loads the
// keys (errors read as stock's fatal lines) and logs stock's warnings.
func New(o Options) (auth.Authenticator, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	switch o.AuthType {
	case "", Munge:
		m, err := munge.New(munge.Options{Socket: o.MungeSocket, TTL: o.TTL, AllowReplay: o.AllowReplay, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("clusterauth: munge: %w", err)
		}
		return m, nil
	case Slurm:
		key, jwks := authslurm.KeyPaths(o.ConfFile, nil)
		set, warnings, err := authslurm.LoadKeys(authslurm.LoadOptions{KeyFile: key, JWKSFile: jwks, SlurmUserID: o.SlurmUserID})
		for _, w := range warnings {
			o.Logger.Warn(w)
		}
		if err != nil {
			return nil, err
		}
		return authslurm.New(authslurm.Config{
			Keys: set, ClusterName: o.ClusterName, Hostname: o.Hostname,
			TTL: time.Duration(o.TTL) * time.Second, Version: o.Version, Logger: o.Logger,
		})
	}
	return nil, fmt.Errorf("clusterauth: AuthType=%s is not supported (auth/munge or auth/slurm)", o.AuthType)
}
