package proc

import (
	"os/user"
	"strconv"
)

// UserName is Slurm's uid_to_string: "root" for 0, the passwd name, else
// "nobody". Used only when a credential carries no user name.
func UserName(uid uint32) string {
	if uid == 0 {
		return "root"
	}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return "nobody"
}
