// Package authtest provides Fake, an in-process auth.Authenticator for unit
// tests that must not need munged. Its credentials look like
// "MUNGE:fake:<base64url JSON>:" and carry uid/gid/payload/restriction in
// clear, so they are worthless outside tests. Failure modes (expired via a
// clock seam, rewound, replayed, uid restricted, invalid, forced errors)
// return the same auth sentinels as auth/munge.
package authtest
