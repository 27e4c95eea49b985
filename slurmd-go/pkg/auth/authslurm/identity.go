package authslurm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/jwtclaim"
)

// Identity is the "id" grant: the user a token speaks for, as the issuer's
// passwd and group databases had it (stock identity_t). Job credentials
// always carry it; SACK tokens only under AuthInfo=use_client_ids.
type Identity struct {
	Name, Gecos, Dir, Shell string
	GIDs                    []uint32 // primary group first (getgrouplist order)
	// GroupNames, when set, has one name per GIDs entry; the grant is then
	// written as "groups": {name: gid} instead of "gids": [gid...].
	GroupNames []string
}

// grant is the value of the "id" claim (stock identity_to_data).
func (id *Identity) grant() jsonObject {
	o := jsonObject{"name": id.Name, "gecos": id.Gecos, "dir": id.Dir, "shell": id.Shell}
	switch {
	case id.GroupNames != nil && len(id.GroupNames) == len(id.GIDs):
		groups := jsonObject{}
		for i, name := range id.GroupNames {
			groups[name] = id.GIDs[i]
		}
		o["groups"] = groups
	case len(id.GIDs) > 0:
		o["gids"] = append([]uint32(nil), id.GIDs...)
	}
	return o
}

// parseIdentity reads an "id" claim (jwtclaim.ParseIdentity); a name the
// grant has no string for is empty.
func parseIdentity(raw json.RawMessage) (*Identity, error) {
	g, err := jwtclaim.ParseIdentity(raw)
	if err != nil {
		return nil, err
	}
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	return &Identity{Name: str(g.Name), Gecos: str(g.Gecos), Dir: str(g.Dir), Shell: str(g.Shell),
		GIDs: g.GIDs, GroupNames: g.GroupNames}, nil
}

// LookupIdentity builds the identity of uid/gid from this host's user
// databases, as stock fetch_identity: the passwd entry of uid and its
// group list (primary gid first). groupNames adds the group names (the
// "groups" form stock uses for SACK tokens under use_client_ids).
//
// Name, home and groups come from os/user (NSS when built with cgo); gecos
// and shell, which os/user does not give, from /etc/passwd, and stay empty
// for a user found only elsewhere.
func LookupIdentity(uid, gid uint32, groupNames bool) (*Identity, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil, fmt.Errorf("authslurm: identity of uid %d: %w", uid, err)
	}
	id := &Identity{Name: u.Username, Gecos: u.Name, Dir: u.HomeDir}
	if gecos, shell, ok := passwdFields("/etc/passwd", uid); ok {
		id.Gecos, id.Shell = gecos, shell
	}
	id.GIDs = []uint32{gid}
	if list, err := u.GroupIds(); err == nil {
		for _, s := range list {
			g, err := strconv.ParseUint(s, 10, 32)
			if err != nil || uint32(g) == gid {
				continue
			}
			id.GIDs = append(id.GIDs, uint32(g))
		}
	}
	if groupNames {
		id.GroupNames = make([]string, len(id.GIDs))
		for i, g := range id.GIDs {
			id.GroupNames[i] = strconv.FormatUint(uint64(g), 10) // stock gid_to_string falls back to the number
			if grp, err := user.LookupGroupId(id.GroupNames[i]); err == nil {
				id.GroupNames[i] = grp.Name
			}
		}
	}
	return id, nil
}

// passwdFields returns the gecos and shell of uid's line in a passwd file.
func passwdFields(path string, uid uint32) (gecos, shell string, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	want := strconv.FormatUint(uint64(uid), 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ":")
		if len(p) == 7 && p[2] == want {
			return p[4], p[6], true
		}
	}
	return "", "", false
}
