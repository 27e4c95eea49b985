package authtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// Prefix starts every fake credential.
const Prefix = "MUNGE:fake:"

// DefaultTTL is munged's default credential lifetime.
const DefaultTTL = 300 * time.Second

// Fake is an in-process auth.Authenticator. Safe for concurrent use.
//
// Its credentials are "MUNGE:fake:<base64url(JSON)>:" with the encoder's
// uid/gid, the payload, the uid restriction, the encode time and a sequence
// number, so two encodes never collide and a test can read one back.
// Decode enforces what munged enforces: uid restriction against the
// decoder's uid (root gets no exemption), TTL (ErrExpired), a future encode
// time (ErrRewound) and, if enabled, replay.
type Fake struct {
	mu          sync.Mutex // guards every field below
	uid, gid    uint32     // identity Encode stamps on credentials
	decoderUID  uint32     // identity Decode runs as
	ttl         time.Duration
	now         func() time.Time
	replay      bool // detect replays
	allowReplay bool // ... and accept them with Replayed=true
	seen        map[string]bool
	seq         uint64
	encodeErr   error
	decodeErr   error
}

var _ auth.Authenticator = (*Fake)(nil)

// New returns a Fake that encodes as uid/gid and decodes as root, with
// munged's default TTL, the real clock and replay detection off.
func New(uid, gid uint32) *Fake {
	return &Fake{uid: uid, gid: gid, ttl: DefaultTTL, now: time.Now, seen: map[string]bool{}}
}

// SetIdentity changes the uid/gid Encode stamps (the "sending process").
func (f *Fake) SetIdentity(uid, gid uint32) { f.mu.Lock(); f.uid, f.gid = uid, gid; f.mu.Unlock() }

// SetDecoderUID changes the uid Decode runs as (checked against restrictions).
func (f *Fake) SetDecoderUID(uid uint32) { f.mu.Lock(); f.decoderUID = uid; f.mu.Unlock() }

// SetTTL changes the lifetime checked by Decode.
func (f *Fake) SetTTL(d time.Duration) { f.mu.Lock(); f.ttl = d; f.mu.Unlock() }

// SetClock replaces time.Now (a clock seam: expire creds without sleeping).
func (f *Fake) SetClock(now func() time.Time) { f.mu.Lock(); f.now = now; f.mu.Unlock() }

// SetReplay turns on replay detection: a credential decodes once; later
// decodes fail with auth.ErrReplayed, or, with allow, succeed with
// Replayed=true (munge.Options.AllowReplay).
func (f *Fake) SetReplay(detect, allow bool) {
	f.mu.Lock()
	f.replay, f.allowReplay = detect, allow
	f.mu.Unlock()
}

// FailEncode makes every Encode return err (nil restores normal behaviour),
// e.g. auth.ErrUnavailable to simulate munged being down.
func (f *Fake) FailEncode(err error) { f.mu.Lock(); f.encodeErr = err; f.mu.Unlock() }

// FailDecode makes every Decode return err (nil restores normal behaviour).
func (f *Fake) FailDecode(err error) { f.mu.Lock(); f.decodeErr = err; f.mu.Unlock() }

type body struct {
	UID      uint32 `json:"uid"`
	GID      uint32 `json:"gid"`
	Restrict uint32 `json:"restrict"`
	Payload  []byte `json:"payload,omitempty"`
	Encoded  int64  `json:"encoded"` // unix nanoseconds
	Seq      uint64 `json:"seq"`
}

// PluginID implements auth.Authenticator: the fake stands in for munge.
func (f *Fake) PluginID() uint32 { return auth.PluginMunge }

// Encode implements auth.Authenticator.
func (f *Fake) Encode(ctx context.Context, payload []byte, restrictUID uint32) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("authtest: encode: %w: %w", auth.ErrUnavailable, err)
	}
	f.mu.Lock()
	if f.encodeErr != nil {
		err := f.encodeErr
		f.mu.Unlock()
		return "", fmt.Errorf("authtest: encode: %w", err)
	}
	f.seq++
	b := body{UID: f.uid, GID: f.gid, Restrict: restrictUID, Payload: payload,
		Encoded: f.now().UnixNano(), Seq: f.seq}
	f.mu.Unlock()
	return Forge(b.UID, b.GID, restrictUID, payload, time.Unix(0, b.Encoded), b.Seq), nil
}

// Forge builds a fake credential with any identity and encode time, for
// tests that need a credential from a user the Fake is not set up as.
func Forge(uid, gid, restrictUID uint32, payload []byte, encoded time.Time, seq uint64) string {
	js, err := json.Marshal(body{UID: uid, GID: gid, Restrict: restrictUID,
		Payload: payload, Encoded: encoded.UnixNano(), Seq: seq})
	if err != nil {
		panic(err) // a struct of ints and bytes always marshals
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(js) + ":"
}

// Decode implements auth.Authenticator.
func (f *Fake) Decode(ctx context.Context, cred string) (auth.Credential, error) {
	if err := ctx.Err(); err != nil {
		return auth.Credential{}, fmt.Errorf("authtest: decode: %w: %w", auth.ErrUnavailable, err)
	}
	cred = strings.TrimSuffix(cred, "\x00")
	b, err := parse(cred)
	if err != nil {
		return auth.Credential{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.decodeErr != nil {
		return auth.Credential{}, fmt.Errorf("authtest: decode: %w", f.decodeErr)
	}
	if b.Restrict != auth.UIDAny && b.Restrict != f.decoderUID {
		return auth.Credential{}, fmt.Errorf("authtest: decode: %w: restricted to uid %d, decoder is uid %d",
			auth.ErrUIDRestricted, b.Restrict, f.decoderUID)
	}
	now, enc := f.now(), time.Unix(0, b.Encoded)
	if now.After(enc.Add(f.ttl)) {
		return auth.Credential{}, fmt.Errorf("authtest: decode: %w: encoded %s, ttl %s",
			auth.ErrExpired, enc.Format(time.RFC3339Nano), f.ttl)
	}
	if enc.After(now) {
		return auth.Credential{}, fmt.Errorf("authtest: decode: %w: encoded %s", auth.ErrRewound, enc.Format(time.RFC3339Nano))
	}
	c := auth.Credential{UID: b.UID, GID: b.GID, Payload: b.Payload}
	if f.replay {
		if f.seen[cred] {
			if !f.allowReplay {
				return auth.Credential{}, fmt.Errorf("authtest: decode: %w", auth.ErrReplayed)
			}
			c.Replayed = true
		}
		f.seen[cred] = true
	}
	return c, nil
}

func parse(cred string) (body, error) {
	var b body
	rest, ok := strings.CutPrefix(cred, Prefix)
	if !ok || !strings.HasSuffix(rest, ":") {
		return b, fmt.Errorf("authtest: decode: %w: not a fake credential", auth.ErrInvalid)
	}
	js, err := base64.RawURLEncoding.DecodeString(strings.TrimSuffix(rest, ":"))
	if err != nil {
		return b, fmt.Errorf("authtest: decode: %w: %w", auth.ErrInvalid, err)
	}
	if err := json.Unmarshal(js, &b); err != nil {
		return b, fmt.Errorf("authtest: decode: %w: %w", auth.ErrInvalid, err)
	}
	return b, nil
}
