package authslurm

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// FuzzVerify: any bytes as a token end in a token or a wrapped auth
// sentinel, never a panic. Seeds: the golden stock tokens.
func FuzzVerify(f *testing.F) {
	b, err := os.ReadFile("testdata/slurm.key")
	if err != nil {
		f.Fatal(err)
	}
	keys, err := NewKeySet(false, Key{Secret: b})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.e30.")
	f.Add("garbage")
	for _, g := range loadGoldenF(f) {
		f.Add(g.Token)
	}
	at := time.Unix(1796118378, 0)
	a, err := New(Config{Keys: keys, Hostname: "h", IDs: &IDs{}, Now: func() time.Time { return at }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		for _, ctx := range []string{ContextAuth, ContextSACK, ContextLaunch, ContextSbcast} {
			got, err := a.Verify(tok, 0, ctx)
			if err == nil {
				if got == nil || got.Context != ctx {
					t.Fatalf("verified %+v for %s", got, ctx)
				}
				continue
			}
			if !errors.Is(err, auth.ErrInvalid) && !errors.Is(err, auth.ErrExpired) && !errors.Is(err, auth.ErrUIDRestricted) {
				t.Fatalf("error without an auth sentinel: %v", err)
			}
		}
		_, _ = a.InspectLaunch(tok)
	})
}

func loadGoldenF(f *testing.F) []goldenToken {
	b, err := os.ReadFile("testdata/tokens.json")
	if err != nil {
		f.Fatal(err)
	}
	var g []goldenToken
	if err := json.Unmarshal(b, &g); err != nil {
		f.Fatal(err)
	}
	return g
}
