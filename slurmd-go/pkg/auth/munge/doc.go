// Package munge implements auth.Authenticator by speaking munged's socket
// protocol (version 4, munge 0.5.x) from Go: one unix-socket connection per
// encode or decode, as libmunge makes, but waited for on Go's netpoller. A
// daemon serving thousands of RPCs a second through libmunge spent a sixth
// of its CPU in the Go runtime's hand-offs around blocking C calls (sysmon
// retaking Ps, waking threads) and kept ~75 threads; see rfc/0001 §4. It is
// what Slurm's auth/munge and cred/munge plugins do, with the same
// semantics:
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
// A Munge is safe for concurrent use; see Munge for how ctx and libmunge's
// bounded waits interact.
//
// Files: wire.go (the protocol's messages), munge.go (transactions, retries,
// Encode, Decode), options.go (Options, Error, code table). The tests run
// against a real munged (scripts/ensure-munged.sh) and cross-check with the
// munge and unmunge commands, which use libmunge.
package munge
