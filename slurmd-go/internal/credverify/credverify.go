// Package credverify checks a step's job credential as slurmd does before
// it launches tasks (req.c _check_job_credential and slurm_cred_verify):
// the munge signature over the exact signed bytes, who signed it, expiry,
// and that the credential is for this step, user and node. Revocation and
// the replay cache belong to the job manager (Verifier.Seen).
package credverify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/rpc"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// Verifier checks credentials. Auth decodes the signature; SlurmUserUID is
// the only uid besides root that may have signed it; Expire is AuthInfo
// cred_expire.
type Verifier struct {
	Auth auth.Authenticator
	// Launch verifies cred/slurm credentials (a "launch" token); nil when
	// the cluster signs credentials with munge, and such tokens are refused.
	Launch       LaunchVerifier
	SlurmUserUID uint32
	Expire       time.Duration
	// Version is the launch's protocol version. From 24.11 slurmd checks
	// the signature while it unpacks the message: a credential that fails
	// it makes the whole launch malformed (AtUnpack).
	Version uint16
	Now     func() time.Time // nil: time.Now
	// Seen records a credential that passed the signature and expiry checks
	// and says whether the same step and creation time was seen before, as
	// slurm_cred_verify's replay check does; nil: no replay check.
	Seen func(step slurmproto.StepID, ctime, expires time.Time) (replayed bool)
}

// LaunchVerifier checks a cred/slurm token (authslurm.Auth.VerifyLaunch):
// signature, expiry, context "launch", restricted to SlurmdUser.
type LaunchVerifier interface {
	VerifyLaunch(token string) (*authslurm.Token, error)
}

// Error is a refused credential with the Slurm code slurmd answers.
type Error struct {
	RC  uint32
	Err error
	// AtUnpack: the release refuses this credential while unpacking the
	// launch, which slurmd then answers as a malformed message
	// (ESLURM_PROTOCOL_INCOMPLETE_PACKET in a RESPONSE_SLURM_RC).
	AtUnpack bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(rc uint32, format string, args ...any) error {
	return &Error{RC: rc, Err: fmt.Errorf(format, args...)}
}

// AtUnpack tells whether err refuses the launch as malformed (Error.AtUnpack).
func AtUnpack(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.AtUnpack
}

// RC is the Slurm code of a Verify error (ESLURMD_INVALID_JOB_CREDENTIAL
// for anything that is not an *Error).
func RC(err error) uint32 {
	var e *Error
	if errors.As(err, &e) {
		return e.RC
	}
	return slurmproto.ESlurmdInvalidJobCredential
}

// Want is what the credential must match.
type Want struct {
	Step     slurmproto.StepID
	UID, GID uint32
	NodeName string
}

// Checked is what the credential says about this node.
type Checked struct {
	JobNodeIndex int    // this node's index in the job's host list
	JobCPUs      uint32 // CPUs of the job on this node
	StepCPUs     uint32 // CPUs of the step on this node (node_cpus)
	JobMemMiB    uint64
	StepMemMiB   uint64
}

// Verify checks c against w. tasks is the number of tasks to launch here
// (with none, the CPU counts are 1 as in slurmd); nodeCPUs is this node's
// CPU count, used to scale core counts to CPUs.
func (v *Verifier) Verify(ctx context.Context, c *slurmproto.Cred, w Want, tasks int, nodeCPUs int) (Checked, error) {
	var out Checked
	if c == nil {
		return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: no credential")
	}
	if err := v.signature(ctx, c); err != nil {
		// cred_p_unpack verifies as it unpacks from 24.11 (cred/munge
		// _verify_signature, cred/slurm's token check).
		var e *Error
		if v.Version >= slurmproto.Version2411 && errors.As(err, &e) {
			e.AtUnpack = true
		}
		return out, err
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	// slurm_cred_verify compares whole seconds: now > ctime + window.
	if exp := c.CTime.Add(v.Expire); now().Unix() > exp.Unix() {
		return out, fail(slurmproto.ESlurmdCredentialExpired, "credverify: credential for %d.%d expired at %s", c.StepID.JobID, c.StepID.StepID, exp.Format(time.RFC3339))
	}
	// Before the step, user and node checks: a credential that fails them
	// still counts as seen, as in slurm_cred_verify.
	if v.Seen != nil && v.Seen(c.StepID, c.CTime, c.CTime.Add(v.Expire)) {
		return out, fail(replayedRC(v.Version), "credverify: credential for %d.%d created %s was already used", c.StepID.JobID, c.StepID.StepID, c.CTime.UTC().Format(time.RFC3339))
	}
	if c.StepID.JobID != w.Step.JobID || c.StepID.StepID != w.Step.StepID {
		return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: credential for %d.%d, expected %d.%d", c.StepID.JobID, c.StepID.StepID, w.Step.JobID, w.Step.StepID)
	}
	if c.UID != w.UID {
		return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: job %d credential created for uid %d, expected %d", c.StepID.JobID, c.UID, w.UID)
	}
	if c.GID != w.GID {
		return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: job %d credential created for gid %d, expected %d", c.StepID.JobID, c.GID, w.GID)
	}
	steps, err := hostlist.Parse(slurmproto.CString(c.StepHostlist))
	if err != nil {
		return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: credential step host list %q: %w", c.StepHostlist, err)
	}
	if steps.Find(w.NodeName) < 0 {
		return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: host %s not in credential host list %s", w.NodeName, slurmproto.CString(c.StepHostlist))
	}
	jobHosts, err := hostlist.Parse(slurmproto.CString(c.JobHostlist))
	if err != nil {
		return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: credential job host list %q: %w", c.JobHostlist, err)
	}
	idx := jobHosts.Find(w.NodeName)
	out.JobNodeIndex = max(idx, 0)
	out.JobCPUs, out.StepCPUs = 1, 1
	if c.JobNHosts > 0 && tasks > 0 {
		if idx < 0 || uint32(idx) >= c.JobNHosts {
			return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: invalid host index %d for job %d", idx, c.StepID.JobID)
		}
		nc, ok := c.CoresForNode(idx)
		if !ok || nc.Cores == 0 {
			return out, fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: no core layout for host index %d of job %d", idx, c.StepID.JobID)
		}
		job, step := uint32(len(nc.Job)), uint32(len(nc.Step))
		if step == 0 {
			step = 1 // "zero processors allocated to step"
		}
		// Cores to CPUs: slurmd scales by CPUs per core of the node.
		if f := nodeCPUs / nc.Cores; f > 1 {
			job *= uint32(f)
			step *= uint32(f)
		}
		out.JobCPUs, out.StepCPUs = job, step
	}
	out.JobMemMiB, out.StepMemMiB = c.MemLimits(out.JobNodeIndex, max(steps.Find(w.NodeName), 0))
	return out, nil
}

// replayedRC is the code of a replayed credential: 24.11's
// _check_job_credential answers every cred_cache_valid failure (replayed or
// revoked) ESLURMD_INVALID_JOB_CREDENTIAL.
func replayedRC(version uint16) uint32 {
	if version >= slurmproto.Version2411 {
		return slurmproto.ESlurmdInvalidJobCredential
	}
	return slurmproto.ESlurmdCredentialReplayed
}

// RevokedRC is the code a launch with a revoked credential gets, as
// replayedRC.
func RevokedRC(version uint16) uint32 {
	if version >= slurmproto.Version2411 {
		return slurmproto.ESlurmdInvalidJobCredential
	}
	return slurmproto.ESlurmdCredentialRevoked
}

// signature is cred_p_verify_sign: the munge credential decodes, was made
// by root or SlurmUser, and carries exactly the signed field bytes; or, for
// cred/slurm, the launch token verifies (cred_slurm.c cred_p_unpack: only a
// key holder makes one) and is for the user the fields name.
func (v *Verifier) signature(ctx context.Context, c *slurmproto.Cred) error {
	if c.Token != "" {
		if v.Launch == nil {
			return fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: a cred/slurm credential, but this node's CredType is not cred/slurm")
		}
		t, err := v.Launch.VerifyLaunch(c.Token)
		if err != nil {
			return fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: credential token: %w", err)
		}
		if !bytes.Equal(t.Payload, c.Signed) {
			return fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: credential token does not carry its fields")
		}
		if t.UID != c.UID || t.GID != c.GID {
			return fail(slurmproto.ESlurmdInvalidJobCredential, "credverify: credential token for uid %d gid %d, fields for %d %d", t.UID, t.GID, c.UID, c.GID)
		}
		return nil
	}
	if err := MungeSignature(ctx, v.Auth, v.SlurmUserUID, c.Signature, c.Signed); err != nil {
		rc := uint32(slurmproto.ESlurmdInvalidJobCredential)
		if errors.Is(err, auth.ErrReplayed) {
			rc = slurmproto.ESlurmdCredentialReplayed
		}
		return &Error{RC: rc, Err: err}
	}
	return nil
}

// MungeSignature is cred/munge's cred_p_verify_sign, for job and sbcast
// credentials alike: sig (its NUL padding trimmed) decodes, within
// rpc.DefaultAuthTimeout, to a credential that root or SlurmUser made and
// that carries exactly the signed field bytes. A decode error is wrapped
// (auth.ErrReplayed where the authenticator refuses replays).
func MungeSignature(ctx context.Context, a auth.Authenticator, slurmUserUID uint32, sig, signed []byte) error {
	sig = bytes.TrimRight(sig, "\x00")
	if len(sig) == 0 {
		return errors.New("credverify: credential is not signed")
	}
	if len(signed) == 0 {
		return errors.New("credverify: credential has no signed bytes")
	}
	ctx, cancel := context.WithTimeout(ctx, rpc.DefaultAuthTimeout)
	defer cancel()
	cred, err := a.Decode(ctx, string(sig))
	if err != nil {
		return fmt.Errorf("credverify: credential signature: %w", err)
	}
	if cred.UID != 0 && cred.UID != slurmUserUID {
		return fmt.Errorf("credverify: credential signed by uid %d, not SlurmUser %d", cred.UID, slurmUserUID)
	}
	if !bytes.Equal(cred.Payload, signed) {
		return errors.New("credverify: credential signature does not cover its fields")
	}
	return nil
}
