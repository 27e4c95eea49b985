package authslurm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// goldenToken is one entry of testdata/tokens.json (testdata/README.md).
type goldenToken struct {
	Name    string `json:"name"`
	Release string `json:"release"`
	Kind    string `json:"kind"` // rpc, launch, sbcast, jwks
	Version uint16 `json:"version"`
	MsgType uint16 `json:"msg_type"`
	Token   string `json:"token"`
	Frame   string `json:"frame"`
}

func loadGolden(t *testing.T) []goldenToken {
	t.Helper()
	b, err := os.ReadFile("testdata/tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	var g []goldenToken
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g) < 50 {
		t.Fatalf("%d golden tokens, want the whole set", len(g))
	}
	return g
}

// testdataKeys loads testdata/slurm.key or slurm.jwks the way a daemon
// does, from a copy with mode 0600 (git keeps no modes).
func testdataKeys(t *testing.T, jwks bool) *KeySet {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{KeyFileName, JWKSFileName} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == JWKSFileName && !jwks {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key, jw := KeyPaths(filepath.Join(dir, "slurm.conf"), func(string) string { return "" })
	set, warnings, err := LoadKeys(LoadOptions{KeyFile: key, JWKSFile: jw})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("LoadKeys: %v %v", err, warnings)
	}
	return set
}

// unverifiedClaims decodes a token's claims without any check (test only).
func unverifiedClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func num(t *testing.T, m map[string]any, k string) int64 {
	t.Helper()
	n, err := m[k].(json.Number).Int64()
	if err != nil {
		t.Fatalf("claim %s: %v", k, err)
	}
	return n
}

// splitFrame is a test-only parser of a >= 0x2A00 frame without forward
// or ret lists: the auth/slurm token and the body.
func splitFrame(frame []byte) (token string, body []byte, err error) {
	be := binary.BigEndian
	if len(frame) < 4 || int(be.Uint32(frame)) != len(frame)-4 {
		return "", nil, errors.New("bad length prefix")
	}
	p := frame[4:]
	flags := be.Uint16(p[2:])
	bodyLen := int(be.Uint32(p[6:]))
	if be.Uint16(p[10:]) != 0 || be.Uint16(p[12:]) != 0 {
		return "", nil, errors.New("forward/ret lists not handled")
	}
	p = p[14:]
	switch fam := be.Uint16(p); fam {
	case 0:
		p = p[2:]
	case 2:
		p = p[8:]
	default:
		return "", nil, fmt.Errorf("address family %d", fam)
	}
	if flags&0x40 != 0 {
		return "", nil, errors.New("no auth block")
	}
	if id := be.Uint32(p); id != PluginID {
		return "", nil, fmt.Errorf("auth plugin %d", id)
	}
	n := int(be.Uint32(p[4:]))
	tok := p[8 : 8+n]
	if tok[n-1] != 0 {
		return "", nil, errors.New("token without NUL")
	}
	body = p[8+n:]
	if len(body) != bodyLen {
		return "", nil, fmt.Errorf("body %d bytes, header says %d", len(body), bodyLen)
	}
	return string(tok), body, nil
}

// TestGolden_StockTokens verifies every token captured from real 24.11 and
// 26.05 daemons, checks an RPC token's payload against its message body,
// and re-makes each token from its claims: the bytes must be stock's.
func TestGolden_StockTokens(t *testing.T) {
	keySet, jwksSet := testdataKeys(t, false), testdataKeys(t, true)
	kinds := map[string]int{}
	for _, g := range loadGolden(t) {
		t.Run(g.Name, func(t *testing.T) {
			kinds[g.Release+" "+g.Kind]++
			c := unverifiedClaims(t, g.Token)
			iat, exp := num(t, c, "iat"), num(t, c, "exp")
			if exp-iat != int64(DefaultTTL/time.Second) {
				t.Fatalf("lifetime %d s, stock's default is 60", exp-iat)
			}
			keys := keySet
			if g.Kind == "jwks" {
				keys = jwksSet
			}
			at := time.Unix(iat, 0)
			ids := IDs{UID: 0, GID: 0, VerifierUID: 0} // the capture's daemons ran as root
			a, err := New(Config{Keys: keys, ClusterName: c["cluster"].(string), Hostname: c["host"].(string),
				IDs: &ids, Now: func() time.Time { return at }, UseClientIDs: true})
			if err != nil {
				t.Fatal(err)
			}
			var tok *Token
			switch g.Kind {
			case "rpc", "jwks":
				cred, err := a.Decode(context.Background(), g.Token+"\x00")
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if tok, err = a.Verify(g.Token, 0, ContextAuth, ContextSACK); err != nil {
					t.Fatal(err)
				}
				if cred.UID != tok.UID || cred.GID != tok.GID || !bytes.Equal(cred.Payload, tok.Payload) {
					t.Fatalf("Decode %+v disagrees with Verify %+v", cred, tok)
				}
				if g.Kind == "jwks" && tok.KeyID != "cur-2026" {
					t.Fatalf("kid %q", tok.KeyID)
				}
			case ContextLaunch:
				if tok, err = a.VerifyLaunch(g.Token); err != nil {
					t.Fatal(err)
				}
				if tok.ID == nil || tok.ID.Name == "" || len(tok.ID.GIDs) == 0 || len(tok.Payload) < 200 {
					t.Fatalf("launch credential without identity or fields: %+v", tok)
				}
			case ContextSbcast:
				if tok, err = a.VerifySbcast(g.Token); err != nil {
					t.Fatal(err)
				}
				if tok.Sbcast.Nodes != "n1" || tok.Sbcast.JobID == 0 || tok.Payload != nil {
					t.Fatalf("sbcast grant %+v", tok.Sbcast)
				}
			default:
				t.Fatalf("kind %q", g.Kind)
			}
			if g.Frame != "" {
				frame, err := hex.DecodeString(g.Frame)
				if err != nil {
					t.Fatal(err)
				}
				wireTok, body, err := splitFrame(frame)
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSuffix(wireTok, "\x00") != g.Token {
					t.Fatal("frame carries another token")
				}
				kind, err := auth.CheckPayload(g.Version, g.MsgType, body, tok.Payload, auth.HashPolicy{BlockNullHash: true, BlockZeroHash: true})
				if err != nil || kind != auth.HashK12 {
					t.Fatalf("payload vs body: %v %v", kind, err)
				}
			}

			// The same claims through Mint: stock's exact bytes.
			remint, err := New(Config{Keys: keys, ClusterName: tok.Cluster, Hostname: tok.Host,
				Version: func() uint16 { return uint16(tok.Version) }, IDs: &ids, Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			mine, err := remint.Mint(tok.Context, tok.UID, tok.GID, tok.RUID, tok.Payload, tok.ID, tok.Sbcast)
			if err != nil {
				t.Fatal(err)
			}
			if mine != g.Token {
				t.Fatalf("re-made token differs:\nstock %s\nmine  %s", g.Token, mine)
			}

			// One second after exp it is refused, as stock (exp < now).
			late := time.Unix(exp, 999e6)
			a.now = func() time.Time { return late }
			if _, err := a.Verify(g.Token, 0, tok.Context); err != nil {
				t.Fatalf("at exp: %v", err)
			}
			late = time.Unix(exp+1, 0)
			if _, err := a.Verify(g.Token, 0, tok.Context); !errors.Is(err, auth.ErrExpired) {
				t.Fatalf("after exp: %v", err)
			}
		})
	}
	for _, want := range []string{"24.11 rpc", "24.11 launch", "24.11 sbcast", "24.11 jwks", "26.05 rpc", "26.05 launch", "26.05 sbcast"} {
		if kinds[want] == 0 {
			t.Errorf("no golden %s token", want)
		}
	}
}
