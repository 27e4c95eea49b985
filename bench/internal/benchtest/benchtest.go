// Package benchtest holds the bench's test fixtures: what several of its packages' tests need
// and no production code does.
package benchtest

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
)

// SlurmAuth is auth/slurm with a fresh random 1024-byte key (as the bench gives each cluster),
// for cluster "tbtest" on host "localhost"; now is its clock (nil: time.Now).
func SlurmAuth(t testing.TB, now func() time.Time) *authslurm.Auth {
	t.Helper()
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	ks, err := authslurm.NewKeySet(false, authslurm.Key{Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authslurm.New(authslurm.Config{Keys: ks, ClusterName: "tbtest", Hostname: "localhost", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
