//go:build !cgo

package munge

import (
	"context"
	"fmt"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// Munge without cgo cannot reach libmunge: New fails, so a CGO_ENABLED=0
// build still compiles its callers and says why at run time.
type Munge struct{}

var _ auth.Authenticator = (*Munge)(nil)

var errNoCgo = fmt.Errorf("munge: %w: built without cgo; libmunge is required", auth.ErrUnavailable)

// New always fails in a build without cgo.
func New(o Options) (*Munge, error) {
	if _, err := o.normalize(); err != nil {
		return nil, err
	}
	return nil, errNoCgo
}

// Socket returns "".
func (m *Munge) Socket() string { return "" }

// Encode always fails in a build without cgo.
func (m *Munge) Encode(context.Context, []byte, uint32) (string, error) { return "", errNoCgo }

// Decode always fails in a build without cgo.
func (m *Munge) Decode(context.Context, string) (auth.Credential, error) {
	return auth.Credential{}, errNoCgo
}

// SelfCheck always fails in a build without cgo.
func (m *Munge) SelfCheck(context.Context) error { return errNoCgo }
