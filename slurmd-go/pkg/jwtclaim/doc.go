// Package jwtclaim reads the claims of Slurm's auth/slurm and cred/slurm
// tokens (24.11 on) as stock reads them with jansson and its data_get_*
// helpers: integers, strings and the "id" grant (extract_identity). It is
// the one home of that parsing, pure like the wire codec: pkg/slurmproto
// (sbcast credential fields out of a token) and pkg/auth/authslurm (token
// verification) both use it. It neither verifies nor signs.
package jwtclaim
