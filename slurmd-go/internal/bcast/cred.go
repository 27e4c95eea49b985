package bcast

import (
	"context"
	"fmt"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/internal/credverify"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/hostlist"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// TokenVerifier checks a cred/slurm sbcast credential
// (authslurm.Auth.VerifySbcast: signature, exp, ruid, context "sbcast").
type TokenVerifier interface {
	VerifySbcast(token string) (*authslurm.Token, error)
}

// RevalidateWindow is 22.05's grace after a restart: a credential that is
// not in the cache of verified signatures is verified again only while the
// daemon started less than this long ago (slurm_cred.c extract_sbcast_cred).
const RevalidateWindow = 60 * time.Second

// errCred is a refused sbcast credential; malformed marks the releases
// (24.11 on) that refuse it while unpacking the message.
type errCred struct {
	err       error
	malformed bool
}

func (e *errCred) Error() string { return e.err.Error() }
func (e *errCred) Unwrap() error { return e.err }

func credFail(malformed bool, format string, args ...any) error {
	return &errCred{err: fmt.Errorf("bcast: "+format, args...), malformed: malformed}
}

// credArgs is what a checked credential says (sbcast_cred_arg_t).
type credArgs struct {
	job, step uint32
	uid, gid  uint32
	gids      []uint32
	// id tells credentials apart: the munge signature or the token.
	id string
}

// sigKey is an entry of 22.05's cache of verified sbcast signatures.
type sigKey struct {
	expires int64
	sig     string
}

// checkCred is _valid_sbcast_cred with the release's extract/unpack step:
// 22.05 verifies the signature of a file's first block and finds later
// blocks' credentials in its cache; 24.11 and 26.05 verify the first block
// (not a library) as they unpack and nothing else. Then the node must be in
// the credential's nodes and the credential's user must be the RPC's.
func (s *Server) checkCred(ctx context.Context, version uint16, reqUID, reqGID uint32, m *slurmproto.FileBcast) (credArgs, error) {
	c := m.Cred
	cfg := s.cfg()
	now := s.now()
	if c == nil {
		return credArgs{}, credFail(false, "no sbcast credential")
	}
	first := m.BlockNo == 1 && m.Flags&slurmproto.FileBcastSO == 0
	if version < slurmproto.Version2411 {
		if err := s.check2205(ctx, cfg, now, first, c); err != nil {
			return credArgs{}, err
		}
	} else if first {
		if err := s.verify(ctx, cfg, now, c); err != nil {
			return credArgs{}, &errCred{err: err, malformed: true}
		}
	}
	nodes, err := hostlist.Parse(slurmproto.CString(c.Nodes))
	if err != nil {
		return credArgs{}, credFail(false, "unable to parse sbcast_cred hostlist %q: %w", c.Nodes, err)
	}
	if nodes.Find(cfg.NodeName) < 0 {
		return credArgs{}, credFail(false, "security violation: sbcast_cred from %d has bad hostset %s", reqUID, slurmproto.CString(c.Nodes))
	}
	a := credArgs{job: c.StepID.JobID, step: c.StepID.StepID, uid: c.UID, gid: c.GID,
		gids: c.Gids, id: c.Token}
	if a.id == "" {
		a.id = string(c.Signature)
	}
	if version < slurmproto.Version2411 {
		// 22.05 fills a missing uid or gid in from the RPC.
		if a.uid == slurmproto.NoVal {
			a.uid = reqUID
		}
		if a.gid == slurmproto.NoVal {
			a.gid = reqGID
		}
	}
	if a.uid != reqUID || a.gid != reqGID {
		return credArgs{}, credFail(false, "security violation: sbcast cred from %d/%d but rpc from %d/%d", a.uid, a.gid, reqUID, reqGID)
	}
	return a, nil
}

// check2205 is 22.05's extract_sbcast_cred.
func (s *Server) check2205(ctx context.Context, cfg Config, now time.Time, first bool, c *slurmproto.SbcastCred) error {
	if c.Token != "" {
		return credFail(false, "a cred/slurm sbcast credential at 22.05")
	}
	if now.Unix() > c.Expiration.Unix() {
		return credFail(false, "sbcast credential for job %d expired at %s", c.StepID.JobID, c.Expiration.UTC().Format(time.RFC3339))
	}
	key := sigKey{expires: c.Expiration.Unix(), sig: string(c.Signature)}
	if !first {
		s.mu.Lock()
		_, ok := s.sigs[key]
		s.mu.Unlock()
		if ok {
			return nil
		}
		if now.Sub(cfg.Started) > RevalidateWindow {
			return credFail(false, "sbcast_cred verify: signature not in cache")
		}
		s.log.Info("sbcast_cred verify: signature not in cache, revalidating (daemon restarted)")
	}
	if err := s.verifyMunge(ctx, cfg, c); err != nil {
		return &errCred{err: err}
	}
	s.mu.Lock()
	for k := range s.sigs {
		if k.expires <= now.Unix() {
			delete(s.sigs, k)
		}
	}
	s.sigs[key] = struct{}{}
	s.mu.Unlock()
	return nil
}

// verify is 24.11's sbcast_p_unpack with verify set.
func (s *Server) verify(ctx context.Context, cfg Config, now time.Time, c *slurmproto.SbcastCred) error {
	if c.Token != "" {
		if cfg.Tokens == nil {
			return fmt.Errorf("bcast: a cred/slurm sbcast credential, but this node's CredType is not cred/slurm")
		}
		t, err := cfg.Tokens.VerifySbcast(c.Token)
		if err != nil {
			return fmt.Errorf("bcast: sbcast credential token: %w", err)
		}
		if t.UID != c.UID || t.GID != c.GID {
			return fmt.Errorf("bcast: sbcast token for uid %d gid %d, fields for %d %d", t.UID, t.GID, c.UID, c.GID)
		}
		return nil
	}
	if now.Unix() > c.Expiration.Unix() {
		return fmt.Errorf("bcast: sbcast credential for job %d expired at %s", c.StepID.JobID, c.Expiration.UTC().Format(time.RFC3339))
	}
	return s.verifyMunge(ctx, cfg, c)
}

// verifyMunge is cred/munge's signature check (a replay is accepted when
// the authenticator accepts it, as Debian's MULTIPLE_SLURMD build does).
func (s *Server) verifyMunge(ctx context.Context, cfg Config, c *slurmproto.SbcastCred) error {
	if err := credverify.MungeSignature(ctx, cfg.Auth, cfg.SlurmUserUID, c.Signature, c.Signed); err != nil {
		// auth.ErrReplayed only where the authenticator refuses replays
		// (not a MULTIPLE_SLURMD node): refused, as cred/munge does.
		return fmt.Errorf("bcast: sbcast_cred verify: %w", err)
	}
	return nil
}
