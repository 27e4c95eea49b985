package slurmproto

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/jwtclaim"
)

// SbcastCred is an sbcast credential (sbcast_cred_t): what slurmctld gives
// sbcast in RESPONSE_JOB_SBCAST_CRED and sbcast sends with every
// REQUEST_FILE_BCAST. Under cred/munge (22.05 src/common/slurm_cred.c
// _pack_sbcast_cred; 24.11 and 26.05 src/plugins/cred/common/cred_common.c
// sbcast_cred_pack):
//
//	22.05: time ctime, expiration; u32 job_id, het_job_id, step_id;
//	       u32 uid, gid; str user_name; arr32 gids; str nodes
//	24.11: identity (23.11); time ctime, expiration;
//	       u32 job_id, het_job_id, step_id; str nodes
//	26.05: step_id (u64 sluid, u32 job_id, step_id, step_het_comp; 25.11);
//	       identity; time ctime, expiration; u32 het_job_id; str nodes
//	                                        <- end of the signed bytes
//	signature: the munge credential with its NUL (22.05 packmem, 24.11+
//	packstr: the same bytes); never empty
//
// Under cred/slurm (24.11+, plugins/auth/slurm/cred_slurm.c) the whole
// credential is one packstr: an "sbcast" JWT without payload. Its claims
// carry the fields: iat and exp, uid and gid, the "id" grant (the rest of
// the identity) and the "sbcast" grant (nodes, job_id, het_job_id, step_id,
// and from 26.05 the sluid as text). DecodeSbcastCred fills the fields from
// them without verifying anything (authslurm.VerifySbcast does).
type SbcastCred struct {
	// StepID: JobID and StepID in every release. SLUID and StepHetComp are
	// on the wire from 26.05 only; before, they decode as 0 and NoVal and
	// are not packed.
	StepID   StepID
	HetJobID uint32
	// Identity is the job user's. 22.05 carries only UID, GID, PwName (its
	// user_name) and Gids.
	Identity
	CTime      time.Time // when slurmctld made it (the token's iat)
	Expiration time.Time // the token's exp under cred/slurm
	Nodes      string    // the job's nodes, a host list expression

	// Signed is the exact bytes from the first field through nodes as
	// received: what the munge signature covers. DecodeSbcastCred sets it
	// (nil for a token) and PackSbcastCred writes it verbatim when non-nil,
	// as Slurm re-sends its saved buffer. Set it to nil after changing
	// fields; PackFields returns the bytes to sign.
	Signed []byte
	// Signature is the munge credential string with its trailing NUL
	// (cred/munge only).
	Signature []byte
	// Token is the cred/slurm JWT ("" for cred/munge); when set it is all
	// that PackSbcastCred writes.
	Token string
}

// DecodeSbcastCred reads an sbcast credential at version: its fields and
// signature, or a cred/slurm token (24.11+) whose claims fill the fields.
// The result does not alias the input.
func DecodeSbcastCred(u *Unpacker, version uint16) (*SbcastCred, error) {
	if !Speaks(version) {
		return nil, u.Fail(fmt.Errorf("%w: sbcast credential layout 0x%04x", ErrNoLayout, version))
	}
	if tok, ok, err := tokenAt(u, version); ok || err != nil {
		if err != nil {
			return nil, err
		}
		c, err := sbcastFromToken(version, tok)
		if err != nil {
			return nil, u.Fail(err)
		}
		return c, nil
	}
	c := new(SbcastCred)
	var err error
	if c.Signed, c.Signature, err = unpackSigned(u, version, c.unpackFields); err != nil {
		return nil, err
	}
	if err := checkSbcastSignature(version, c.Signature); err != nil {
		return nil, u.Fail(err)
	}
	return c, nil
}

// checkSbcastSignature refuses what unpack_sbcast_cred refuses: no
// signature, and from 24.11 (packstr) one that is no NUL-terminated string.
func checkSbcastSignature(version uint16, sig []byte) error {
	if len(sig) == 0 {
		return fmt.Errorf("%w: sbcast credential without a signature", ErrMalformed)
	}
	if version >= Version2411 && sig[len(sig)-1] != 0 {
		return fmt.Errorf("%w: sbcast credential signature is not NUL-terminated", ErrMalformed)
	}
	return nil
}

// PackSbcastCred appends c at version: the token if set, else Signed
// verbatim if set, else the packed fields, then the signature.
func PackSbcastCred(p *Packer, version uint16, c *SbcastCred) error {
	if !Speaks(version) {
		return fmt.Errorf("%w: sbcast credential layout 0x%04x", ErrNoLayout, version)
	}
	if c == nil {
		return fmt.Errorf("%w: nil sbcast credential", ErrMalformed)
	}
	if c.Token == "" {
		if err := checkSbcastSignature(version, c.Signature); err != nil {
			return err
		}
	}
	return packSigned(p, version, c.Token, c.Signed, c.Signature, c.packFields)
}

// PackFields returns c's fields packed at version, ignoring Signed,
// Signature and Token: the bytes slurmctld's cred/munge signs.
func (c *SbcastCred) PackFields(version uint16) ([]byte, error) {
	return packedFields("sbcast credential", version, c.packFields)
}

func (c *SbcastCred) unpackFields(u *Unpacker, v uint16) error {
	var err error
	if v >= Version2605 {
		if c.StepID, err = u.StepID(v); err != nil {
			return err
		}
	} else {
		c.StepID.StepHetComp = NoVal
	}
	if v >= Version2411 {
		if c.Identity, err = unpackIdentity(u); err != nil {
			return err
		}
	}
	c.CTime, _ = u.Time()
	c.Expiration, _ = u.Time()
	if v < Version2605 {
		c.StepID.JobID, _ = u.U32()
	}
	c.HetJobID, _ = u.U32()
	if v < Version2605 {
		c.StepID.StepID, _ = u.U32()
	}
	if v == Version2205 {
		c.UID, _ = u.U32()
		c.GID, _ = u.U32()
		c.PwName, _ = u.Str()
		c.Gids, _ = u.U32Array()
	}
	c.Nodes, _ = u.Str()
	return u.Err()
}

func (c *SbcastCred) packFields(p *Packer, v uint16) error {
	if v >= Version2605 {
		p.StepID(v, c.StepID)
	}
	if v >= Version2411 {
		if err := c.Identity.pack(p); err != nil {
			return err
		}
	}
	p.Time(c.CTime)
	p.Time(c.Expiration)
	if v < Version2605 {
		p.U32(c.StepID.JobID)
	}
	p.U32(c.HetJobID)
	if v < Version2605 {
		p.U32(c.StepID.StepID)
	}
	if v == Version2205 {
		p.U32(c.UID)
		p.U32(c.GID)
		p.Str(c.PwName)
		p.U32Array(c.Gids)
	}
	p.Str(c.Nodes)
	return nil
}

// sbcastClaims are the claims of a cred/slurm sbcast token that carry
// credential fields (internal.c create_internal, sbcast.c encode_sbcast).
// A claim that is absent reads as 0 or NULL, as Slurm's data_get_* do.
type sbcastClaims struct {
	Context string          `json:"context"`
	Iat     json.Number     `json:"iat"`
	Exp     json.Number     `json:"exp"`
	UID     json.Number     `json:"uid"`
	GID     json.Number     `json:"gid"`
	ID      json.RawMessage `json:"id"`
	Sbcast  *struct {
		Nodes    *string     `json:"nodes"`
		JobID    json.Number `json:"job_id"`
		HetJobID json.Number `json:"het_job_id"`
		StepID   json.Number `json:"step_id"`
		SLUID    string      `json:"sluid"`
	} `json:"sbcast"`
}

// sbcastFromToken decodes the fields of a cred/slurm sbcast credential out
// of its token's claims (sbcast_p_unpack, extract_sbcast, extract_identity).
func sbcastFromToken(v uint16, tok string) (*SbcastCred, error) {
	raw, err := tokenClaims(tok)
	if err != nil {
		return nil, err
	}
	var cl sbcastClaims
	if err := json.Unmarshal(raw, &cl); err != nil {
		return nil, fmt.Errorf("%w: sbcast token claims: %v", ErrMalformed, err)
	}
	if cl.Context != "sbcast" {
		return nil, fmt.Errorf("%w: sbcast credential token has context %q", ErrMalformed, cl.Context)
	}
	if cl.Sbcast == nil {
		return nil, fmt.Errorf("%w: sbcast credential token has no sbcast grant", ErrMalformed)
	}
	c := &SbcastCred{Token: tok, StepID: StepID{StepHetComp: NoVal}, Nodes: claimStr(cl.Sbcast.Nodes)}
	if c.CTime, err = claimTime("iat", cl.Iat); err != nil {
		return nil, err
	}
	if c.Expiration, err = claimTime("exp", cl.Exp); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		n    json.Number
		dst  *uint32
	}{
		{"uid", cl.UID, &c.UID}, {"gid", cl.GID, &c.GID}, {"sbcast.job_id", cl.Sbcast.JobID, &c.StepID.JobID},
		{"sbcast.het_job_id", cl.Sbcast.HetJobID, &c.HetJobID}, {"sbcast.step_id", cl.Sbcast.StepID, &c.StepID.StepID},
	} {
		if *f.dst, err = claimU32(f.name, f.n); err != nil {
			return nil, err
		}
	}
	if v >= Version2605 && cl.Sbcast.SLUID != "" {
		if c.StepID.SLUID, err = ParseSLUID(cl.Sbcast.SLUID); err != nil {
			return nil, wrap("sbcast token claim sbcast.sluid", err)
		}
	}
	if err := idFromClaim(cl.ID, &c.Identity); err != nil {
		return nil, err
	}
	return c, nil
}

// idFromClaim reads the "id" grant (jwtclaim.ParseIdentity) into id's
// names and groups (the uid and gid are claims of their own). No grant
// leaves them empty: stock then looks the user up on the node.
func idFromClaim(raw json.RawMessage, id *Identity) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	g, err := jwtclaim.ParseIdentity(raw)
	if err != nil {
		return fmt.Errorf("%w: sbcast token claim id: %v", ErrMalformed, err)
	}
	id.PwName, id.PwGecos, id.PwDir, id.PwShell = claimStr(g.Name), claimStr(g.Gecos), claimStr(g.Dir), claimStr(g.Shell)
	id.Gids, id.GrNames = g.GIDs, g.GroupNames
	if len(id.GrNames) == 0 {
		id.GrNames = nil
	}
	return nil
}

// claimStr maps a JSON string claim to the package's string convention:
// absent or null is NULL (""), "" is EmptyString.
func claimStr(s *string) string {
	switch {
	case s == nil:
		return ""
	case *s == "":
		return EmptyString
	}
	return *s
}

func claimU32(name string, n json.Number) (uint32, error) {
	if n == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(n.String(), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: sbcast token claim %s %q is no u32", ErrMalformed, name, n)
	}
	return uint32(v), nil
}

func claimTime(name string, n json.Number) (time.Time, error) {
	if n == "" {
		return time.Time{}, nil
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: sbcast token claim %s %q is no time", ErrMalformed, name, n)
	}
	if v == 0 {
		return time.Time{}, nil
	}
	return time.Unix(v, 0), nil
}
