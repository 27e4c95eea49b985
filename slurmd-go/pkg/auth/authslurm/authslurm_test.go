package authslurm

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

var testNow = time.Unix(1796118378, 0)

func testAuth(t *testing.T, keys *KeySet, mod func(*Config)) *Auth {
	t.Helper()
	cfg := Config{Keys: keys, ClusterName: "c1", Hostname: "h1", IDs: &IDs{UID: 0, GID: 0, VerifierUID: 0},
		Now: func() time.Time { return testNow }}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustKeys(t *testing.T, secret string) *KeySet {
	t.Helper()
	k, err := NewKeySet(false, Key{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// resign replaces a token's claims segment and signs it with secret.
func resign(t *testing.T, tok string, claims string, secret string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	signing := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	sig, err := jwt.SigningMethodHS256.Sign(signing, []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestAuth_EncodeDecode(t *testing.T) {
	keys := mustKeys(t, "k1")
	var ver uint16 = Version2605
	a := testAuth(t, keys, func(c *Config) {
		c.IDs = &IDs{UID: 5001, GID: 5002, VerifierUID: 0}
		c.Version = func() uint16 { return ver }
		c.TTL = 90 * time.Second
	})
	payload := auth.Payload(0x2A00, 1008, nil, auth.HashK12)
	tok, err := a.Encode(context.Background(), payload, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := a.Decode(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if cred.UID != 5001 || cred.GID != 5002 || string(cred.Payload) != string(payload) {
		t.Fatalf("decoded %+v", cred)
	}
	if _, err := auth.CheckPayload(0x2A00, 1008, nil, cred.Payload, auth.HashPolicy{}); err != nil {
		t.Fatal(err)
	}
	tk, err := a.Verify(tok, 0, ContextAuth)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Expires-tk.IssuedAt != 90 || tk.Version != int64(Version2605) || tk.Context != ContextAuth ||
		tk.Cluster != "c1" || tk.Host != "h1" || tk.RUID != auth.UIDAny {
		t.Fatalf("claims %+v", tk)
	}
	// The layout stock writes: sorted keys, no payload claim for no payload.
	tok2, err := a.Encode(context.Background(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	claims, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok2, ".")[1])
	want := `{"cluster":"c1","context":"auth","exp":1796118468,"gid":5002,"host":"h1","iat":1796118378,"ruid":0,"uid":5001,"ver":11520}`
	if string(claims) != want {
		t.Fatalf("claims %s\nwant   %s", claims, want)
	}
	head, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok2, ".")[0])
	if string(head) != `{"alg":"HS256","typ":"JWT"}` {
		t.Fatalf("header %s", head)
	}
}

func TestAuth_Decode_Failures(t *testing.T) {
	keys := mustKeys(t, "the key")
	a := testAuth(t, keys, nil)
	ctx := context.Background()
	good, err := a.Encode(ctx, []byte{2, 1, 2, 3}, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	claimsOf := func(tok string) string {
		b, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
		return string(b)
	}
	c := claimsOf(good)
	other := testAuth(t, mustKeys(t, "another key"), nil)
	forged, _ := other.Encode(ctx, []byte{2, 1, 2, 3}, auth.UIDAny)
	restricted, _ := a.Encode(ctx, nil, 1000)
	expired := testAuth(t, keys, func(cf *Config) {
		cf.Now = func() time.Time { return testNow.Add(-61 * time.Second) }
	})
	old, _ := expired.Encode(ctx, nil, auth.UIDAny)
	foreign := testAuth(t, keys, func(cf *Config) { cf.ClusterName = "elsewhere" })
	otherCluster, _ := foreign.Encode(ctx, nil, auth.UIDAny)
	launch, _ := a.MintLaunch([]byte("fields"), 0, 0, &Identity{Name: "root"}, 0)
	parts := strings.Split(good, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"exp": testNow.Unix() + 9}).SignedString([]byte("the key"))

	cases := []struct {
		name string
		tok  string
		want error
		log  string // part of the error text: stock's log wording
	}{
		{"forged signature", forged, auth.ErrBadSignature, "jwt_decode (with key) failure"},
		{"claims altered after signing", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(c, `"uid":0`, `"uid":7`, 1))) + "." + parts[2], auth.ErrBadSignature, "signature is invalid"},
		{"alg none", none, auth.ErrBadSignature, "signing method none is invalid"},
		{"alg HS512", hs512, auth.ErrBadSignature, "signing method HS512 is invalid"},
		{"expired", old, auth.ErrExpired, "token expired at 1796118377"},
		{"restricted to uid 1000", restricted, auth.ErrUIDRestricted, "asked to verify token with r_uid=1000 for uid=0, rejecting"},
		{"launch context", launch, auth.ErrWrongContext, `context "launch"`},
		{"garbage", "garbage", auth.ErrMalformed, "jwt_decode failure"},
		{"empty", "", auth.ErrMalformed, "NULL token"},
		{"two segments", parts[0] + "." + parts[1], auth.ErrMalformed, "invalid number of segments"},
		{"claims not base64", parts[0] + ".@@@." + parts[2], auth.ErrMalformed, "base64"},
		{"claims not JSON", resign(t, good, `{"exp":`, "the key"), auth.ErrMalformed, "JSON"},
		{"no host", resign(t, good, strings.Replace(c, `"host":"h1",`, "", 1), "the key"), auth.ErrMalformed, "failure for host"},
		{"no context", resign(t, good, strings.Replace(c, `"context":"auth",`, "", 1), "the key"), auth.ErrMalformed, "failure for context"},
		{"uid as string", resign(t, good, strings.Replace(c, `"uid":0`, `"uid":"0"`, 1), "the key"), auth.ErrMalformed, "failure for uid"},
		{"exp as float", resign(t, good, strings.Replace(c, `"exp":1796118438`, `"exp":1796118438.5`, 1), "the key"), auth.ErrMalformed, "exp"},
		{"no exp", resign(t, good, strings.Replace(c, `"exp":1796118438,`, "", 1), "the key"), auth.ErrMalformed, "exp: missing"},
		{"no ruid", resign(t, good, strings.Replace(c, `"ruid":4294967295,`, "", 1), "the key"), auth.ErrMalformed, "ruid"},
		{"payload not base64", resign(t, good, strings.Replace(c, `"payload":"AgECAw=="`, `"payload":"%%%"`, 1), "the key"), auth.ErrMalformed, "payload"},
		{"NUL inside", good[:10] + "\x00" + good[10:], auth.ErrMalformed, "NUL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cred, err := a.Decode(ctx, tc.tok)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if tc.want != auth.ErrExpired && tc.want != auth.ErrUIDRestricted && !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("err %v is not an auth.ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.log) {
				t.Fatalf("error %q does not say %q", err, tc.log)
			}
			if cred.UID != 0 || cred.GID != 0 || cred.Payload != nil {
				t.Fatalf("credential %+v on error", cred)
			}
			if got := auth.RC(err); got != auth.RCAuthenticationError {
				t.Fatalf("RC %d", got)
			}
		})
	}

	// Stock never checks the cluster; with CheckCluster a token of another
	// cluster is refused.
	if _, err := a.Decode(ctx, otherCluster); err != nil {
		t.Fatalf("another cluster refused by default: %v", err)
	}
	strict := testAuth(t, keys, func(cf *Config) { cf.CheckCluster = true })
	if _, err := strict.Decode(ctx, otherCluster); !errors.Is(err, auth.ErrWrongCluster) {
		t.Fatalf("CheckCluster: %v", err)
	}
	if _, err := strict.Decode(ctx, good); err != nil {
		t.Fatal(err)
	}
	// The uid the token is restricted to may verify it; so may a sack token.
	if _, err := a.Verify(restricted, 1000, ContextAuth); err != nil {
		t.Fatal(err)
	}
	if err := a.VerifySACK(ctx, restricted, 1000); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Decode(cancelled, good); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

func TestAuth_JWKS(t *testing.T) {
	set, err := parseJWKS([]byte(`{"keys":[
		{"alg":"HS256","kty":"oct","kid":"old","k":"b2xkLWtleS0wMTIzNDU2Nzg5"},
		{"alg":"hs256","kty":"OCT","kid":"new","k":"bmV3LWtleS0wMTIzNDU2Nzg5","use":"default"},
		{"alg":"HS256","kty":"oct","kid":"gone","k":"Z29uZS1rZXktMDEyMzQ1Njc4OQ","exp":1796118000}]}`), "slurm.jwks")
	if err != nil {
		t.Fatal(err)
	}
	if set.Signing().ID != "new" {
		t.Fatalf("default key %q", set.Signing().ID)
	}
	a := testAuth(t, set, nil)
	tok, err := a.Encode(context.Background(), nil, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if string(head) != `{"alg":"HS256","kid":"new","typ":"JWT"}` {
		t.Fatalf("header %s", head)
	}
	if tk, err := a.Verify(tok, 0, ContextAuth); err != nil || tk.KeyID != "new" {
		t.Fatalf("%v %+v", err, tk)
	}
	// A token of each key verifies by its kid; without kid the default key.
	mintWith := func(kid string, headerKID bool) string {
		for _, k := range set.keys {
			if k.ID == kid {
				one, _ := NewKeySet(headerKID, k)
				tok, err := testAuth(t, one, nil).Encode(context.Background(), nil, auth.UIDAny)
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
		}
		t.Fatalf("no key %s", kid)
		return ""
	}
	if _, err := a.Decode(context.Background(), mintWith("old", true)); err != nil {
		t.Fatalf("old key: %v", err)
	}
	if _, err := a.Decode(context.Background(), mintWith("new", false)); err != nil {
		t.Fatalf("no kid, default key: %v", err)
	}
	if _, err := a.Decode(context.Background(), mintWith("old", false)); !errors.Is(err, auth.ErrBadSignature) {
		t.Fatalf("no kid, signed by old: %v", err)
	}
	_, err = a.Decode(context.Background(), mintWith("gone", true))
	if !errors.Is(err, auth.ErrBadSignature) || !strings.Contains(err.Error(), "token received for expired key kid=gone") {
		t.Fatalf("expired key: %v", err)
	}
	stranger, _ := NewKeySet(true, Key{ID: "stranger", Secret: []byte("0123456789abcdef")})
	tok, _ = testAuth(t, stranger, nil).Encode(context.Background(), nil, auth.UIDAny)
	if _, err := a.Decode(context.Background(), tok); !errors.Is(err, auth.ErrBadSignature) || !strings.Contains(err.Error(), "could not find kid=stranger") {
		t.Fatalf("unknown kid: %v", err)
	}
}

func TestAuth_LaunchAndSbcast(t *testing.T) {
	a := testAuth(t, mustKeys(t, "k"), func(c *Config) { c.IDs = &IDs{UID: 0, GID: 0, VerifierUID: 64030} })
	id := &Identity{Name: "alice", Gecos: "Alice <a&b>", Dir: "/home/alice", Shell: "/bin/sh", GIDs: []uint32{100, 27}}
	fields := []byte{0, 0, 0, 1, 0xff, 0xfe}
	tok, err := a.MintLaunch(fields, 1000, 100, id, 64030)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.VerifyLaunch(tok)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != string(fields) || got.UID != 1000 || got.ID.Gecos != id.Gecos || len(got.ID.GIDs) != 2 || got.ID.GIDs[1] != 27 {
		t.Fatalf("launch %+v %+v", got, got.ID)
	}
	claims, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if !strings.Contains(string(claims), `"id":{"dir":"/home/alice","gecos":"Alice <a&b>","gids":[100,27],"name":"alice","shell":"/bin/sh"}`) {
		t.Fatalf("id grant %s", claims)
	}
	// Restricted to SlurmdUser: another slurmd uid may not verify it.
	other := testAuth(t, a.keys, func(c *Config) { c.IDs = &IDs{VerifierUID: 0} })
	if _, err := other.VerifyLaunch(tok); !errors.Is(err, auth.ErrUIDRestricted) {
		t.Fatalf("launch for 64030 verified by 0: %v", err)
	}
	// slurmstepd's view: no signature or ruid check, still context and exp.
	if got, err := other.InspectLaunch(tok); err != nil || got.UID != 1000 {
		t.Fatalf("inspect: %v", err)
	}
	forged := tok[:len(tok)-4] + "AAAA"
	if _, err := a.VerifyLaunch(forged); !errors.Is(err, auth.ErrBadSignature) {
		t.Fatalf("forged launch: %v", err)
	}
	if _, err := a.Verify(tok, 64030, ContextAuth, ContextSACK); !errors.Is(err, auth.ErrWrongContext) {
		t.Fatalf("launch as RPC credential: %v", err)
	}
	if _, err := a.MintLaunch(fields, 1, 1, nil, 0); err == nil {
		t.Fatal("launch credential without identity made")
	}

	sb := SbcastGrant{Nodes: "n[1-2]", JobID: 7, HetJobID: 0xfffffffe, StepID: 3, SLUID: "s1"}
	stok, err := a.MintSbcast(sb, 1000, 100, id, 64030)
	if err != nil {
		t.Fatal(err)
	}
	sgot, err := a.VerifySbcast(stok)
	if err != nil {
		t.Fatal(err)
	}
	if *sgot.Sbcast != sb || sgot.Payload != nil || sgot.ID.Name != "alice" {
		t.Fatalf("sbcast %+v", sgot.Sbcast)
	}
	if _, err := a.VerifySbcast(tok); !errors.Is(err, auth.ErrWrongContext) {
		t.Fatalf("launch as sbcast: %v", err)
	}
}

func TestAuth_SACKIdentity(t *testing.T) {
	calls := 0
	a := testAuth(t, mustKeys(t, "k"), func(c *Config) {
		c.UseClientIDs = true
		c.LookupIdentity = func(uid, gid uint32) (*Identity, error) {
			calls++
			if uid == 9 {
				return nil, errors.New("no such user")
			}
			return &Identity{Name: "u", GIDs: []uint32{gid}, GroupNames: []string{"g"}}, nil
		}
	})
	tok, err := a.MintSACK(context.Background(), 1000, 100, auth.UIDAny, []byte{1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Verify(tok, 5, ContextSACK)
	if err != nil {
		t.Fatal(err)
	}
	if got.Context != ContextSACK || got.UID != 1000 || got.ID == nil || got.ID.GroupNames[0] != "g" || got.ID.GIDs[0] != 100 {
		t.Fatalf("sack token %+v %+v", got, got.ID)
	}
	claims, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if !strings.Contains(string(claims), `"groups":{"g":100}`) {
		t.Fatalf("groups form %s", claims)
	}
	// A peer without a passwd entry gets a token without "id", as stock.
	tok, err = a.MintSACK(context.Background(), 9, 9, auth.UIDAny, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Verify(tok, 0, ContextSACK); err != nil || got.ID != nil {
		t.Fatalf("%v %+v", err, got)
	}
	if calls != 2 {
		t.Fatalf("%d lookups", calls)
	}
	// Without use_client_ids an RPC token's id is not taken.
	plain := testAuth(t, a.keys, nil)
	tok, _ = a.MintSACK(context.Background(), 1000, 100, auth.UIDAny, nil)
	if got, err := plain.Verify(tok, 0, ContextSACK); err != nil || got.ID != nil {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestParseAuthInfo(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want AuthInfo
	}{
		{"", AuthInfo{}},
		{"ttl=120", AuthInfo{TTL: 120 * time.Second}},
		{"socket=/x,ttl=30,use_client_ids", AuthInfo{TTL: 30 * time.Second, UseClientIDs: true}},
		{"disable_sack,ttl=-5", AuthInfo{DisableSACK: true}},
		{"ttl=abc", AuthInfo{}},
		{"ttl=45s", AuthInfo{TTL: 45 * time.Second}},
	} {
		if got := ParseAuthInfo(tc.in); got != tc.want {
			t.Errorf("ParseAuthInfo(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	if ShortHostname("node1.example.org") != "node1" || ShortHostname("vm") != "vm" {
		t.Fatal("ShortHostname")
	}
}

func TestNew_Errors(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrKey) {
		t.Fatalf("no keys: %v", err)
	}
	if _, err := New(Config{Keys: mustKeys(t, "k"), TTL: -time.Second}); err == nil {
		t.Fatal("negative ttl accepted")
	}
	a, err := New(Config{Keys: mustKeys(t, "k")})
	if err != nil {
		t.Fatal(err)
	}
	if a.ttl != DefaultTTL || a.version() != Version2411 || a.host == "" || strings.Contains(a.host, ".") {
		t.Fatalf("defaults %+v", a)
	}
}
