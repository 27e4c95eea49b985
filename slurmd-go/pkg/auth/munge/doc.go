// Package munge implements auth.Authenticator over libmunge (cgo, links
// -lmunge; build needs libmunge-dev). It is what Slurm's auth/munge and
// cred/munge plugins do, with the same semantics:
//
//   - Encode sets MUNGE_OPT_UID_RESTRICTION unless the restriction is
//     auth.UIDAny, and MUNGE_OPT_TTL when Options.TTL is set.
//   - Decode returns the encoder's uid/gid and the payload. munge errors
//     map to the auth sentinels (expired, rewound, replayed, uid restricted,
//     invalid, unavailable); *Error keeps munge's code and message.
//   - A replayed credential is an error unless Options.AllowReplay
//     (Debian's MULTIPLE_SLURMD build), which returns it with Replayed set.
//   - EMUNGE_SOCKET is retried every 100 ms, up to 20 times, like Slurm.
//
// Observed munged 0.5.15 behaviour (asserted by the tests): root cannot
// decode a credential restricted to another uid (EMUNGE_CRED_UNAUTHORIZED;
// SelfCheck refuses a munged built otherwise, as Slurm does); munged keeps
// a replay cache, so a credential decodes successfully once per munged and
// after that reports EMUNGE_CRED_REPLAYED while still returning its
// uid/gid/payload; a failed (unauthorized) decode does not consume it.
//
// Every call uses a fresh munge context (contexts are not thread-safe), so
// a Munge is safe for concurrent use. libmunge cannot be cancelled: see
// Munge for how ctx and the bounded wait interact.
//
// Files: options.go (Options, Error, code table; pure Go), munge.go (the
// cgo implementation), munge_nocgo.go (CGO_ENABLED=0: New fails with
// auth.ErrUnavailable, so callers still compile). The munged tests and
// benchmarks are cgo-only and start munged via scripts/ensure-munged.sh.
package munge
