package authslurm

import (
	"encoding/json"
	"fmt"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/jwtclaim"
)

// A cred/slurm job credential is packstr(token) in the message where
// cred/munge has its packed fields and signature: a "launch" token whose
// payload is exactly the packed credential fields cred/munge would sign,
// restricted to SlurmdUser, with the job user's identity as the "id" grant.
// An sbcast credential is an "sbcast" token without payload whose "sbcast"
// grant names the job, step and nodes.

// MintLaunch makes a job credential as slurmctld's cred_p_create: fields
// are the packed credential fields (the codec's business), id the job
// user's identity, slurmdUID SlurmdUser's uid.
func (a *Auth) MintLaunch(fields []byte, uid, gid uint32, id *Identity, slurmdUID uint32) (string, error) {
	if id == nil {
		return "", fmt.Errorf("authslurm: launch credential without identity: %w", auth.ErrInvalid)
	}
	return a.Mint(ContextLaunch, uid, gid, slurmdUID, fields, id, nil)
}

// VerifyLaunch checks a job credential as slurmd's cred_p_unpack: signature,
// alg, exp, ruid against IDs.VerifierUID (slurmd's own uid, SlurmdUser) and
// context "launch". The Token's Payload holds the packed credential fields
// and ID the job user's identity (nil when the issuer sent none; stock then
// looks the user up locally). A job credential lives only the token TTL
// (60 s by default), not cred/munge's 120 s cred_expire.
func (a *Auth) VerifyLaunch(token string) (*Token, error) {
	return a.Verify(token, a.ids.VerifierUID, ContextLaunch)
}

// InspectLaunch decodes a job credential without checking its signature
// or ruid, as slurmstepd does (it trusts slurmd, which verified it), but
// still refuses an alg other than HS256, an expired token and another
// context.
func (a *Auth) InspectLaunch(token string) (*Token, error) {
	t, err := verify(a.keys, token, verifyOptions{contexts: []string{ContextLaunch}, skipSignature: true, now: a.now()})
	if err != nil {
		return nil, fmt.Errorf("authslurm: %w", err)
	}
	return t, nil
}

// SbcastGrant is the "sbcast" grant of an sbcast credential.
type SbcastGrant struct {
	Nodes    string
	JobID    uint32
	HetJobID uint32
	StepID   uint32
	// SLUID is 26.05's step sluid as text ("" before 26.05, or when 0).
	SLUID string
}

func (g *SbcastGrant) grant() jsonObject {
	o := jsonObject{"nodes": g.Nodes, "job_id": g.JobID, "het_job_id": g.HetJobID, "step_id": g.StepID}
	if g.SLUID != "" {
		o["sluid"] = g.SLUID
	}
	return o
}

func parseSbcast(raw json.RawMessage) (*SbcastGrant, error) {
	var f struct {
		Nodes    json.RawMessage `json:"nodes"`
		JobID    json.RawMessage `json:"job_id"`
		HetJobID json.RawMessage `json:"het_job_id"`
		StepID   json.RawMessage `json:"step_id"`
		SLUID    json.RawMessage `json:"sluid"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("extract_sbcast: failed to decode sbcast field: %w", err)
	}
	g := &SbcastGrant{}
	g.Nodes, _ = jwtclaim.String(f.Nodes)
	g.SLUID, _ = jwtclaim.String(f.SLUID)
	var err error
	for _, p := range []struct {
		name string
		raw  json.RawMessage
		dst  *uint32
	}{{"job_id", f.JobID, &g.JobID}, {"het_job_id", f.HetJobID, &g.HetJobID}, {"step_id", f.StepID, &g.StepID}} {
		if len(p.raw) == 0 {
			continue
		}
		if *p.dst, err = jwtclaim.Uint32(p.raw); err != nil {
			return nil, fmt.Errorf("extract_sbcast: %s: %w", p.name, err)
		}
	}
	return g, nil
}

// MintSbcast makes an sbcast credential as slurmctld's sbcast_p_create.
func (a *Auth) MintSbcast(g SbcastGrant, uid, gid uint32, id *Identity, slurmdUID uint32) (string, error) {
	return a.Mint(ContextSbcast, uid, gid, slurmdUID, nil, id, &g)
}

// VerifySbcast checks an sbcast credential as slurmd's sbcast_p_unpack
// (verify=true): signature, exp, ruid, context "sbcast" and the grant.
func (a *Auth) VerifySbcast(token string) (*Token, error) {
	t, err := a.Verify(token, a.ids.VerifierUID, ContextSbcast)
	if err != nil {
		return nil, err
	}
	if t.Sbcast == nil {
		return nil, fmt.Errorf("authslurm: %w: sbcast_p_unpack: jwt_get_grants_json() failure for sbcast", auth.ErrMalformed)
	}
	return t, nil
}
