package authslurm

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// PluginID is AUTH_PLUGIN_SLURM, the u32 that starts an auth/slurm auth
// block on the wire (followed by packstr(token)).
const PluginID = auth.PluginSlurm

// DefaultTTL is a token's lifetime without AuthInfo=ttl= (stock DEFAULT_TTL).
const DefaultTTL = 60 * time.Second

// Protocol versions a token's "ver" claim may carry.
const (
	Version2411 uint16 = 0x2A00
	Version2605 uint16 = 0x2D00
)

// IDs are the uids and gid of the process a daemon's tokens speak for.
type IDs struct {
	UID, GID uint32 // stamped on tokens Encode makes (stock getuid/getgid)
	// VerifierUID is checked against a token's ruid on Decode and when
	// verifying job credentials (stock getuid(): SlurmdUser for slurmd).
	VerifierUID uint32
}

// ProcessIDs are this process's ids.
func ProcessIDs() IDs {
	return IDs{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), VerifierUID: uint32(os.Getuid())}
}

// Config configures an Auth.
type Config struct {
	Keys *KeySet // required (LoadKeys)
	// ClusterName is the "cluster" claim (slurm.conf ClusterName); "" omits it.
	ClusterName string
	// Hostname is the "host" claim; "" means this host's short name.
	Hostname string
	// TTL is the lifetime of tokens made here (AuthInfo=ttl=); 0 means
	// DefaultTTL.
	TTL time.Duration
	// Version gives the "ver" claim for each token. Stock writes its own
	// build's SLURM_PROTOCOL_VERSION whatever the peer speaks, and no
	// release reads the claim back. nil means Version2411.
	Version func() uint16
	// IDs nil means ProcessIDs().
	IDs *IDs
	// CheckCluster refuses tokens whose "cluster" is not ClusterName
	// (auth.ErrWrongCluster). Stock 24.11 and 26.05 never check it, so the
	// default accepts any cluster, as they do.
	CheckCluster bool
	// UseClientIDs is AuthInfo=use_client_ids: SACK tokens carry the peer's
	// identity ("id" grant) and Decode returns it in Token.ID.
	UseClientIDs bool
	// LookupIdentity finds a peer's identity for UseClientIDs; nil means
	// LookupIdentity(uid, gid, true).
	LookupIdentity func(uid, gid uint32) (*Identity, error)
	// Now is the clock (tests); nil means time.Now.
	Now    func() time.Time
	Logger hclog.Logger
}

// Auth makes and verifies auth/slurm tokens as a daemon that holds the key
// does (stock "internal" mode: slurmd, slurmctld, sackd). It implements
// auth.Authenticator for RPC credentials and the sack package's Service
// for a SACK socket. Safe for concurrent use; nothing in it blocks.
type Auth struct {
	keys       *KeySet
	cluster    string
	host       string
	ttl        time.Duration
	version    func() uint16
	ids        IDs
	checkClust bool
	clientIDs  bool
	lookupID   func(uid, gid uint32) (*Identity, error)
	now        func() time.Time
	log        hclog.Logger
}

var _ auth.Authenticator = (*Auth)(nil)

// New returns an Auth.
func New(cfg Config) (*Auth, error) {
	if cfg.Keys == nil || len(cfg.Keys.keys) == 0 {
		return nil, fmt.Errorf("authslurm: no key: %w", ErrKey)
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("authslurm: ttl %s < 0", cfg.TTL)
	}
	a := &Auth{
		keys: cfg.Keys, cluster: cfg.ClusterName, host: cfg.Hostname, ttl: cfg.TTL,
		version: cfg.Version, checkClust: cfg.CheckCluster, clientIDs: cfg.UseClientIDs,
		lookupID: cfg.LookupIdentity, now: cfg.Now, log: cfg.Logger,
	}
	if a.host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("authslurm: hostname: %w", err)
		}
		a.host = ShortHostname(h)
	}
	if a.ttl == 0 {
		a.ttl = DefaultTTL
	}
	if a.version == nil {
		a.version = func() uint16 { return Version2411 }
	}
	if cfg.IDs != nil {
		a.ids = *cfg.IDs
	} else {
		a.ids = ProcessIDs()
	}
	if a.lookupID == nil {
		a.lookupID = func(uid, gid uint32) (*Identity, error) { return LookupIdentity(uid, gid, true) }
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = hclog.NewNullLogger()
	}
	a.log = a.log.Named("authslurm")
	return a, nil
}

// ShortHostname is stock xshort_hostname: the name up to the first dot.
func ShortHostname(h string) string {
	if i := strings.IndexByte(h, '.'); i >= 0 {
		return h[:i]
	}
	return h
}

// AuthInfo is what auth/slurm reads from slurm.conf's AuthInfo. Stock
// looks for each word anywhere in the string (strstr), and so does this.
type AuthInfo struct {
	TTL          time.Duration // ttl=N; 0 when absent or not positive
	UseClientIDs bool          // use_client_ids
	DisableSACK  bool          // disable_sack: the daemon opens no SACK socket
}

// ParseAuthInfo reads an AuthInfo value as auth/slurm does.
func ParseAuthInfo(s string) AuthInfo {
	var ai AuthInfo
	if i := strings.Index(s, "ttl="); i >= 0 {
		ai.TTL = time.Duration(atoi(s[i+4:])) * time.Second
		if ai.TTL < 0 {
			ai.TTL = 0
		}
	}
	ai.UseClientIDs = strings.Contains(s, "use_client_ids")
	ai.DisableSACK = strings.Contains(s, "disable_sack")
	return ai
}

// atoi is C atoi: leading blanks and sign, digits up to the first other
// byte, 0 when there are none.
func atoi(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	end := 0
	if end < len(s) && (s[end] == '-' || s[end] == '+') {
		end++
	}
	for end < len(s) && s[end] >= '0' && s[end] <= '9' && end < 19 {
		end++
	}
	n, _ := strconv.ParseInt(s[:end], 10, 64)
	return n
}

// Mint makes a token of any context for uid/gid, readable by ruid, as
// stock create_internal: payload (if any) and the extra grants id and
// sbcast (nil leaves them out).
func (a *Auth) Mint(context string, uid, gid, ruid uint32, payload []byte, id *Identity, sb *SbcastGrant) (string, error) {
	extra := jsonObject{}
	if id != nil {
		extra["id"] = id.grant()
	}
	if sb != nil {
		extra["sbcast"] = sb.grant()
	}
	return sign(a.keys, mintClaims{
		now: a.now(), ttl: a.ttl, version: a.version(), context: context,
		cluster: a.cluster, host: a.host, uid: uid, gid: gid, ruid: ruid,
		payload: payload, extra: extra,
	})
}

// PluginID implements auth.Authenticator.
func (a *Auth) PluginID() uint32 { return PluginID }

// Encode implements auth.Authenticator: an "auth" token for this process's
// uid/gid carrying payload (the message hash), that only restrictUID may
// verify (auth.UIDAny: anyone). Any goroutine; does not block.
func (a *Auth) Encode(ctx context.Context, payload []byte, restrictUID uint32) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("authslurm: encode: %w", err)
	}
	return a.Mint(ContextAuth, a.ids.UID, a.ids.GID, restrictUID, payload, nil, nil)
}

// Decode implements auth.Authenticator: verifies an RPC's token as stock
// verify_internal (signature, alg, exp, ruid against IDs.VerifierUID,
// context "auth" or "sack") and returns the sender's uid/gid and payload.
// Errors wrap auth.ErrBadSignature, ErrMalformed, ErrExpired,
// ErrUIDRestricted, ErrWrongContext (and ErrWrongCluster with
// CheckCluster). Any goroutine; does not block.
func (a *Auth) Decode(ctx context.Context, token string) (auth.Credential, error) {
	if err := ctx.Err(); err != nil {
		return auth.Credential{}, fmt.Errorf("authslurm: decode: %w", err)
	}
	t, err := a.Verify(token, a.ids.VerifierUID, ContextAuth, ContextSACK)
	if err != nil {
		return auth.Credential{}, err
	}
	return auth.Credential{UID: t.UID, GID: t.GID, Payload: t.Payload}, nil
}

// Verify checks token for decoderUID and one of contexts, and returns it.
func (a *Auth) Verify(token string, decoderUID uint32, contexts ...string) (*Token, error) {
	t, err := verify(a.keys, token, verifyOptions{
		contexts: contexts, decoderUID: decoderUID,
		cluster: a.cluster, checkCluster: a.checkClust, now: a.now(),
	})
	if err != nil {
		return nil, fmt.Errorf("authslurm: %w", err)
	}
	if !a.clientIDs && (t.Context == ContextAuth || t.Context == ContextSACK) {
		t.ID = nil // stock reads "id" of an RPC token only under use_client_ids
	}
	return t, nil
}

// MintSACK makes the "sack" token a SACK CREATE asks for: for the peer's
// uid/gid (from SO_PEERCRED), readable by ruid, carrying data; with
// UseClientIDs, also the peer's identity. It is the sack package's
// Service. Any goroutine.
func (a *Auth) MintSACK(ctx context.Context, uid, gid, ruid uint32, data []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("authslurm: sack create: %w", err)
	}
	var id *Identity
	if a.clientIDs {
		var err error
		if id, err = a.lookupID(uid, gid); err != nil {
			// Stock sends no "id" when fetch_identity finds no user.
			a.log.Warn("no identity for SACK peer", "uid", uid, "gid", gid, "error", err)
			id = nil
		}
	}
	return a.Mint(ContextSACK, uid, gid, ruid, data, id, nil)
}

// VerifySACK checks a token for a SACK VERIFY from a peer running as uid:
// the checks of Decode with the peer as the decoder. Any goroutine.
func (a *Auth) VerifySACK(ctx context.Context, token string, uid uint32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("authslurm: sack verify: %w", err)
	}
	_, err := a.Verify(token, uid, ContextAuth, ContextSACK)
	return err
}
