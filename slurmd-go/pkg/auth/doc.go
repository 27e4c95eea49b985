// Package auth is the RPC authentication contract of slurmd-go: the
// Authenticator interface, its error sentinels and their Slurm return codes,
// and the 22.05 message body hash carried as the credential's payload.
//
// Every Slurm RPC frame carries an auth block (plugin id 101 + a munge
// credential string). The credential's payload is not data but a hash of
// the message body (slurm-22.05-protocol.md §1.5):
//
//	22.05 header:   0x02 || K12(body, customization = BE16(msg_type))[32]
//	                or 0x01 || BE16(msg_type)   ("none", mirrored in replies)
//	<=21.08 header: 0x01 || msg_type in host (little-endian) order
//
// A receiver decodes the credential (Authenticator.Decode), then checks the
// payload against the exact body bytes (CheckPayload); a sender builds the
// payload with Payload and encodes it (Authenticator.Encode).
//
// Implementations: auth/munge (munged's socket protocol, in Go),
// auth/authslurm (24.11+ auth/slurm JWTs; its SACK socket is auth/sack) and
// auth/authtest (an in-process fake for unit tests). This package itself is
// pure Go (stdlib + circl's KangarooTwelve).
package auth
