package authslurm

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/jwtclaim"
)

// Token contexts (the "context" claim): what a token may be used for.
const (
	ContextAuth   = "auth"   // an RPC's credential, made by a daemon
	ContextSACK   = "sack"   // an RPC's credential, minted over a SACK socket for a client
	ContextLaunch = "launch" // a cred/slurm job credential
	ContextSbcast = "sbcast" // an sbcast credential
	ContextNet    = "net"    // node address aliases
)

// uidAny is SLURM_AUTH_UID_ANY as the "ruid" claim carries it.
const uidAny = int64(auth.UIDAny)

// Token is a decoded auth/slurm token: its claims and the key it was
// verified with.
type Token struct {
	Raw      string // the token as received, without a trailing NUL
	KeyID    string // the kid header ("" without one)
	IssuedAt int64  // iat, Unix seconds
	Expires  int64  // exp, Unix seconds
	Version  int64  // ver: the sender's SLURM_PROTOCOL_VERSION (0 if absent; never checked)
	RUID     uint32 // the uid allowed to verify (auth.UIDAny: anyone)
	Context  string
	Cluster  string // "" when the claim is absent
	UID, GID uint32
	Host     string
	Payload  []byte    // nil when the claim is absent
	ID       *Identity // the "id" grant, nil when absent
	Sbcast   *SbcastGrant
}

// wireClaims are the claims as decoded; values stay raw so types are
// checked as jansson's are (an integer claim must be a JSON integer).
type wireClaims struct {
	IAT     json.RawMessage `json:"iat"`
	EXP     json.RawMessage `json:"exp"`
	Ver     json.RawMessage `json:"ver"`
	RUID    json.RawMessage `json:"ruid"`
	Context json.RawMessage `json:"context"`
	Cluster json.RawMessage `json:"cluster"`
	UID     json.RawMessage `json:"uid"`
	GID     json.RawMessage `json:"gid"`
	Host    json.RawMessage `json:"host"`
	Payload json.RawMessage `json:"payload"`
	ID      json.RawMessage `json:"id"`
	Sbcast  json.RawMessage `json:"sbcast"`
}

// The jwt.Claims methods: claims are validated here, not by the library
// (WithoutClaimsValidation), to keep stock's rules and messages.
func (c *wireClaims) GetExpirationTime() (*jwt.NumericDate, error) { return nil, nil }
func (c *wireClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return nil, nil }
func (c *wireClaims) GetNotBefore() (*jwt.NumericDate, error)      { return nil, nil }
func (c *wireClaims) GetIssuer() (string, error)                   { return "", nil }
func (c *wireClaims) GetSubject() (string, error)                  { return "", nil }
func (c *wireClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }

// parser accepts only HS256 (stock: "no support for alg=%s"), with
// base64url segments without padding, as libjwt writes them.
var parser = jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithoutClaimsValidation())

// errNoVerify is returned by a keyfunc that skips the signature check.
var errNoVerify = errors.New("authslurm: signature not checked")

// verifyOptions say what a token must be to pass.
type verifyOptions struct {
	contexts      []string // accepted "context" values
	decoderUID    uint32   // checked against "ruid"
	cluster       string   // when checkCluster: the "cluster" a token must name
	checkCluster  bool
	skipSignature bool // stock decode_jwt(verify=false): slurmstepd's view of a job credential
	now           time.Time
}

// verify is stock decode_jwt + copy_jwt_grants_to_cred + the context check,
// in that order. Errors wrap the auth sentinels and carry stock's message.
func verify(keys *KeySet, raw string, o verifyOptions) (*Token, error) {
	raw = strings.TrimSuffix(raw, "\x00")
	if raw == "" || strings.IndexByte(raw, 0) >= 0 {
		return nil, fmt.Errorf("%w: verify_internal: rejecting NULL token (empty, or with a NUL inside)", auth.ErrMalformed)
	}
	var wc wireClaims
	var keyErr error
	tok, err := parser.ParseWithClaims(raw, &wc, func(t *jwt.Token) (any, error) {
		if o.skipSignature {
			return nil, errNoVerify
		}
		kid, hasKID := t.Header["kid"].(string)
		k, err := keys.lookup(kid, hasKID, o.now)
		if err != nil {
			keyErr = err
			return nil, err
		}
		return k.Secret, nil
	})
	switch {
	case err == nil:
	case o.skipSignature && errors.Is(err, errNoVerify):
	case keyErr != nil:
		return nil, fmt.Errorf("%w: decode_jwt: %s", auth.ErrBadSignature, keyErr)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return nil, fmt.Errorf("%w: decode_jwt: jwt_decode failure: %s", auth.ErrMalformed, err)
	default: // bad signature, alg not HS256, alg missing
		return nil, fmt.Errorf("%w: decode_jwt: jwt_decode (with key) failure: %s", auth.ErrBadSignature, err)
	}
	t := &Token{Raw: raw}
	if tok != nil {
		t.KeyID, _ = tok.Header["kid"].(string)
	}

	if t.Expires, err = jwtclaim.Int(wc.EXP); err != nil {
		return nil, fmt.Errorf("%w: decode_jwt: exp: %s", auth.ErrMalformed, err)
	}
	if t.Expires < o.now.Unix() {
		return nil, fmt.Errorf("%w: decode_jwt: token expired at %d", auth.ErrExpired, t.Expires)
	}
	ruid, err := jwtclaim.Int(wc.RUID)
	if err != nil {
		return nil, fmt.Errorf("%w: decode_jwt: jwt_get_grant_int failure for uid (ruid: %s)", auth.ErrMalformed, err)
	}
	if !o.skipSignature && ruid != uidAny && ruid != int64(o.decoderUID) {
		return nil, fmt.Errorf("%w: decode_jwt: asked to verify token with r_uid=%d for uid=%d, rejecting",
			auth.ErrUIDRestricted, ruid, o.decoderUID)
	}
	if ruid < 0 || ruid > uidAny {
		return nil, fmt.Errorf("%w: decode_jwt: ruid %d out of range", auth.ErrMalformed, ruid)
	}
	t.RUID = uint32(ruid)

	if t.IssuedAt, err = jwtclaim.Int(wc.IAT); err != nil {
		return nil, fmt.Errorf("%w: copy_jwt_grants_to_cred: jwt_get_grant_int failure for iat (%s)", auth.ErrMalformed, err)
	}
	if t.UID, err = jwtclaim.Uint32(wc.UID); err != nil {
		return nil, fmt.Errorf("%w: copy_jwt_grants_to_cred: jwt_get_grant_int failure for uid (%s)", auth.ErrMalformed, err)
	}
	if t.GID, err = jwtclaim.Uint32(wc.GID); err != nil {
		return nil, fmt.Errorf("%w: copy_jwt_grants_to_cred: jwt_get_grant_int failure for gid (%s)", auth.ErrMalformed, err)
	}
	var ok bool
	if t.Host, ok = jwtclaim.String(wc.Host); !ok {
		return nil, fmt.Errorf("%w: copy_jwt_grants_to_cred: jwt_get_grant failure for host", auth.ErrMalformed)
	}
	t.Cluster, _ = jwtclaim.String(wc.Cluster) // optional, as in stock
	if t.Context, ok = jwtclaim.String(wc.Context); !ok {
		return nil, fmt.Errorf("%w: copy_jwt_grants_to_cred: jwt_get_grant failure for context", auth.ErrMalformed)
	}
	if len(wc.Payload) > 0 {
		p, ok := jwtclaim.String(wc.Payload)
		if !ok {
			return nil, fmt.Errorf("%w: copy_jwt_grants_to_cred: payload is not a string", auth.ErrMalformed)
		}
		if t.Payload, err = decodePayload(p); err != nil {
			return nil, fmt.Errorf("%w: copy_jwt_grants_to_cred: xbase64_decode failed to decode payload", auth.ErrMalformed)
		}
	}
	t.Version, _ = jwtclaim.Int(wc.Ver)

	if !contains(o.contexts, t.Context) {
		return nil, fmt.Errorf("%w: context %q, want %s", auth.ErrWrongContext, t.Context, strings.Join(o.contexts, " or "))
	}
	if o.checkCluster && t.Cluster != o.cluster {
		return nil, fmt.Errorf("%w: cluster %q, this is %q", auth.ErrWrongCluster, t.Cluster, o.cluster)
	}
	if len(wc.ID) > 0 && string(wc.ID) != "null" {
		if t.ID, err = parseIdentity(wc.ID); err != nil {
			return nil, fmt.Errorf("%w: %s", auth.ErrMalformed, err)
		}
	}
	if len(wc.Sbcast) > 0 && string(wc.Sbcast) != "null" {
		if t.Sbcast, err = parseSbcast(wc.Sbcast); err != nil {
			return nil, fmt.Errorf("%w: %s", auth.ErrMalformed, err)
		}
	}
	return t, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// decodePayload decodes the "payload" claim: standard base64, as libjwt's
// jwt_Base64encode writes it; padding is optional.
func decodePayload(s string) ([]byte, error) {
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}

// mintClaims are the values create_internal puts in a token.
type mintClaims struct {
	now      time.Time
	ttl      time.Duration
	version  uint16
	context  string
	cluster  string
	host     string
	uid, gid uint32
	ruid     uint32
	payload  []byte     // omitted when empty
	extra    jsonObject // extra grants ("id", "sbcast")
}

// sign makes the token: header and claims as libjwt 1.17 writes them
// (sorted keys, compact), HS256 over "b64url(header).b64url(claims)" with
// the signing key, the golang-jwt signer doing the HMAC.
func sign(keys *KeySet, c mintClaims) (string, error) {
	k := keys.Signing()
	header := jsonObject{"alg": "HS256", "typ": "JWT"}
	if keys.JWKS && k.ID != "" {
		header["kid"] = k.ID
	}
	iat := c.now.Unix()
	claims := jsonObject{}
	for name, v := range c.extra {
		claims[name] = v
	}
	claims["iat"] = iat
	claims["exp"] = iat + int64(c.ttl/time.Second)
	claims["ver"] = int64(c.version)
	claims["ruid"] = c.ruid
	claims["context"] = c.context
	if c.cluster != "" {
		claims["cluster"] = c.cluster
	}
	claims["uid"] = c.uid
	claims["gid"] = c.gid
	claims["host"] = c.host
	if len(c.payload) > 0 {
		claims["payload"] = base64.StdEncoding.EncodeToString(c.payload)
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(appendJSON(nil, header)) + "." + enc.EncodeToString(appendJSON(nil, claims))
	sig, err := jwt.SigningMethodHS256.Sign(signing, k.Secret)
	if err != nil {
		return "", fmt.Errorf("authslurm: create_internal: jwt_set_alg failure: %w", err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}
