package slurmproto

import "fmt"

// Identity is a job user's identity as pack_identity packs it (23.11+,
// src/common/identity.c; the same bytes as the uid..gr_names block of the
// 22.05 job credential):
//
//	u32 uid, gid; str pw_name, pw_gecos, pw_dir, pw_shell; arr32 gids;
//	strarray gr_names (empty, or one name per gid)
type Identity struct {
	UID, GID uint32
	PwName   string
	PwGecos  string
	PwDir    string
	PwShell  string
	Gids     []uint32
	GrNames  []string // empty or len(Gids)
}

func (id *Identity) check() error {
	if len(id.GrNames) != 0 && len(id.GrNames) != len(id.Gids) {
		return fmt.Errorf("%w: identity has %d gr_names for %d gids", ErrMalformed, len(id.GrNames), len(id.Gids))
	}
	return nil
}

func (id *Identity) pack(p *Packer) error {
	if err := id.check(); err != nil {
		return err
	}
	p.U32(id.UID)
	p.U32(id.GID)
	p.Str(id.PwName)
	p.Str(id.PwGecos)
	p.Str(id.PwDir)
	p.Str(id.PwShell)
	p.U32Array(id.Gids)
	p.StrArray(id.GrNames)
	return nil
}

func unpackIdentity(u *Unpacker) (Identity, error) {
	var id Identity
	id.UID, _ = u.U32()
	id.GID, _ = u.U32()
	id.PwName, _ = u.Str()
	id.PwGecos, _ = u.Str()
	id.PwDir, _ = u.Str()
	id.PwShell, _ = u.Str()
	id.Gids, _ = u.U32Array()
	id.GrNames, _ = u.StrArray()
	if u.Err() != nil {
		return id, u.Err()
	}
	if err := id.check(); err != nil {
		return id, u.Fail(err)
	}
	return id, nil
}
