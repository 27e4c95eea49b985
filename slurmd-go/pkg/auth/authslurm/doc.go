// Package authslurm is Slurm's auth/slurm and cred/slurm (24.11, 26.05) in
// Go for a daemon that holds the key: loading slurm.key or slurm.jwks as
// stock daemons do, making and verifying the HS256 JWTs that carry RPC
// credentials (contexts "auth" and "sack"), job credentials ("launch") and
// sbcast credentials ("sbcast"). It implements auth.Authenticator and the
// token side of a SACK socket (package sack).
//
// A token, as stock makes it with libjwt 1.17 (checked byte for byte
// against tokens captured from real 24.11.5 and 26.05.5 daemons, see
// testdata/README.md):
//
//	base64url({"alg":"HS256"[,"kid":K],"typ":"JWT"}) . base64url(claims) . base64url(HMAC-SHA256)
//	claims, compact with keys sorted: cluster context exp gid host iat [id]
//	    [payload] ruid [sbcast] uid ver
//
// The HMAC key is the whole slurm.key file, or the default key of
// slurm.jwks (its kid in the header). exp = iat + AuthInfo ttl= (60 s by
// default). payload is standard base64 of the data: for RPCs the message
// hash that auth.CheckPayload checks (0x02 || K12(body)), for job
// credentials the packed credential fields.
//
// Verification follows stock decode_jwt, copy_jwt_grants_to_cred and
// verify_internal: alg must be HS256 and the signature valid (else
// auth.ErrBadSignature; an unknown kid or expired jwks key too), exp must
// not be in the past (auth.ErrExpired), ruid must be SLURM_AUTH_UID_ANY or
// the verifier's uid (auth.ErrUIDRestricted), iat, uid, gid, host and
// context must be there (auth.ErrMalformed, as for anything that is not a
// JWT), and the context must be the one asked for (auth.ErrWrongContext).
// Stock checks neither "cluster" nor "ver"; the cluster check is opt-in
// (Config.CheckCluster, auth.ErrWrongCluster). There is no replay cache.
//
// Files: keys.go (key files), token.go (claims, sign, verify), json.go
// (jansson's JSON layout), identity.go (the "id" grant), cred.go (launch
// and sbcast credentials), authslurm.go (Config, Auth).
package authslurm
