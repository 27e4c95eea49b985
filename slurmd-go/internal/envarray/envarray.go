package envarray

import "strings"

// Size limits of src/common/env.c.
const (
	BufSize   = 256 * 1024 // ENV_BUFSIZE: values are formatted into this
	MaxStrlen = 32 * 4096  // MAX_ENV_STRLEN: setenvf refuses longer entries
	NameMax   = 256        // env_array_merge's name buffer
)

// Env is a C environment array ("NAME=value" entries in order) with the
// semantics of Slurm's env.c helpers. The zero value is empty.
type Env []string

// find is _find_name_in_env: the first entry "name=...".
func (e Env) find(name string) int {
	for i, kv := range e {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			return i
		}
	}
	return -1
}

// Get is getenvp.
func (e Env) Get(name string) (string, bool) {
	if i := e.find(name); i >= 0 {
		return e[i][len(name)+1:], true
	}
	return "", false
}

func truncValue(v string) string {
	if len(v) >= BufSize {
		return v[:BufSize-1]
	}
	return v
}

// Overwrite is env_array_overwrite(_fmt): replace the first "name=" entry
// in place, or append.
func (e *Env) Overwrite(name, value string) {
	kv := name + "=" + truncValue(value)
	if i := e.find(name); i >= 0 {
		(*e)[i] = kv
		return
	}
	*e = append(*e, kv)
}

// Append is env_array_append(_fmt): add only if name is absent.
func (e *Env) Append(name, value string) {
	if e.find(name) < 0 {
		*e = append(*e, name+"="+truncValue(value))
	}
}

// Setenvf is setenvf on an array: Overwrite unless the entry would reach
// MAX_ENV_STRLEN, in which case nothing is set (and false returned).
func (e *Env) Setenvf(name, value string) bool {
	value = truncValue(value)
	if name == "" || len(name)+len(value)+2 >= MaxStrlen {
		return false
	}
	e.Overwrite(name, value)
	return true
}

// Unset is unsetenvp: remove every "name=" entry.
func (e *Env) Unset(name string) {
	out := (*e)[:0]
	for _, kv := range *e {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			continue
		}
		out = append(out, kv)
	}
	*e = out
}

// Copy is env_array_copy: a merge into an empty array, which drops entries
// without '=' or with over-long names or values and collapses duplicate
// names into the first position with the last value.
func (e Env) Copy() Env { return Env(nil).Merge(e) }

// Merge is env_array_merge(&e, src) on a copy of e: every well-formed
// entry of src overwrites or joins e's.
func (e Env) Merge(src []string) Env {
	out := append(Env(nil), e...)
	for _, kv := range src {
		i := strings.IndexByte(kv, '=')
		if i < 0 || i+1 > NameMax || len(kv)-i > BufSize {
			continue
		}
		out.Overwrite(kv[:i], kv[i+1:])
	}
	return out
}
