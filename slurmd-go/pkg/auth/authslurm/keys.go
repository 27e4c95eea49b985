package authslurm

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/jwtclaim"
)

// Key file names, looked for in slurm.conf's directory, and the environment
// variables that override their paths (SLURM_SACK_KEY, SLURM_SACK_JWKS: set
// by configless fetches and sackd -k).
const (
	KeyFileName  = "slurm.key"
	JWKSFileName = "slurm.jwks"
	EnvKey       = "SLURM_SACK_KEY"
	EnvJWKS      = "SLURM_SACK_JWKS"
)

// minJWKSKeyLen is the shortest "k" a slurm.jwks key may have (stock:
// "key lacks sufficient entropy"). A slurm.key has no minimum: 24.11 and
// 26.05 both sign with a one-byte key file.
const minJWKSKeyLen = 16

// ErrKey is wrapped by every key-loading error. Error texts are stock's
// fatal() lines without the "fatal: " prefix, so a daemon logs the same
// words stock does.
var ErrKey = errors.New("authslurm: key")

type keyError struct{ msg string }

func (e *keyError) Error() string { return e.msg }
func (e *keyError) Unwrap() error { return ErrKey }

func keyErrorf(format string, a ...any) error { return &keyError{msg: fmt.Sprintf(format, a...)} }

// Key is one HS256 key.
type Key struct {
	ID      string    // kid; "" for slurm.key
	Secret  []byte    // HMAC key: the whole slurm.key file, or a JWKS "k"
	Expires time.Time // zero: never (JWKS "exp")
}

// KeySet is the signing key and the keys accepted when verifying: one key
// from slurm.key, or every key of a slurm.jwks. Safe for concurrent use
// (read-only after Load).
type KeySet struct {
	Path     string // the file the keys came from
	JWKS     bool   // keys came from slurm.jwks: tokens carry a kid header
	keys     []Key
	signWith int // index of the default key in keys
}

// NewKeySet makes a KeySet from keys already in memory (tests, benches).
// The first key signs; with jwks, tokens carry its kid.
func NewKeySet(jwks bool, keys ...Key) (*KeySet, error) {
	if len(keys) == 0 {
		return nil, keyErrorf("default_key or this_hostname missing")
	}
	for _, k := range keys {
		if len(k.Secret) == 0 {
			return nil, keyErrorf("authslurm: empty key %q", k.ID)
		}
	}
	return &KeySet{JWKS: jwks, keys: append([]Key(nil), keys...)}, nil
}

// Signing returns the key tokens are signed with.
func (s *KeySet) Signing() Key { return s.keys[s.signWith] }

// Keys returns every key (a copy).
func (s *KeySet) Keys() []Key { return append([]Key(nil), s.keys...) }

// lookup returns the key a token with this kid header is verified with:
// without a kid, the default key (stock: "using default key"); with a kid
// that this set has no key for, an error. slurm.key sets ignore kid, as
// stock does.
func (s *KeySet) lookup(kid string, hasKID bool, now time.Time) (Key, error) {
	if !s.JWKS || !hasKID {
		k := s.keys[s.signWith]
		if s.JWKS && keyExpired(k, now) {
			return Key{}, fmt.Errorf("token received for expired key kid=%s", k.ID)
		}
		return k, nil
	}
	for _, k := range s.keys {
		if k.ID == kid {
			if keyExpired(k, now) {
				return Key{}, fmt.Errorf("token received for expired key kid=%s", k.ID)
			}
			return k, nil
		}
	}
	return Key{}, fmt.Errorf("could not find kid=%s", kid)
}

// keyExpired is stock's "key->exp && key->exp < time(NULL)".
func keyExpired(k Key, now time.Time) bool {
	return !k.Expires.IsZero() && k.Expires.Unix() < now.Unix()
}

// KeyPaths returns the slurm.key and slurm.jwks paths a daemon reading
// slurmConf uses: $SLURM_SACK_KEY / $SLURM_SACK_JWKS when set, else the
// file names in slurm.conf's directory (stock get_extra_conf_path).
func KeyPaths(slurmConf string, getenv func(string) string) (key, jwks string) {
	if getenv == nil {
		getenv = os.Getenv
	}
	dir := filepath.Dir(slurmConf)
	if key = getenv(EnvKey); key == "" {
		key = filepath.Join(dir, KeyFileName)
	}
	if jwks = getenv(EnvJWKS); jwks == "" {
		jwks = filepath.Join(dir, JWKSFileName)
	}
	return key, jwks
}

// LoadOptions say where the keys are and who should own them.
type LoadOptions struct {
	KeyFile  string // slurm.key path (KeyPaths)
	JWKSFile string // slurm.jwks path; used instead of KeyFile when it exists
	// SlurmUserID is SlurmUser's uid: a key owned by neither it nor root
	// gets a warning (not when SlurmUser is root, as in stock).
	SlurmUserID uint32
}

// LoadKeys reads the keys as stock init_internal does: slurm.jwks if it
// can be stat'ed, else slurm.key. The file must not grant "other" any
// permission. Warnings (a key owned by someone else) are returned for the
// caller to log; errors wrap ErrKey and read as stock's fatal lines.
func LoadKeys(o LoadOptions) (set *KeySet, warnings []string, err error) {
	path, jwks := o.KeyFile, false
	if o.JWKSFile != "" {
		if _, err := os.Stat(o.JWKSFile); err == nil {
			path, jwks = o.JWKSFile, true
		}
	}
	if w, err := checkKeyPermissions(path, o.SlurmUserID); err != nil {
		return nil, nil, err
	} else if w != "" {
		warnings = append(warnings, w)
	}
	data, err := readKeyFile(path)
	if err != nil {
		return nil, warnings, err
	}
	if !jwks {
		return &KeySet{Path: path, keys: []Key{{Secret: data}}}, warnings, nil
	}
	set, err = parseJWKS(data, path)
	if err != nil {
		return nil, warnings, err
	}
	return set, warnings, nil
}

// checkKeyPermissions is stock's _check_key_permissions with S_IRWXO.
func checkKeyPermissions(path string, slurmUser uint32) (warning string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", keyErrorf("auth/slurm: cannot stat '%s': %s", path, errnoText(err))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && slurmUser != 0 && st.Uid != slurmUser {
		warning = fmt.Sprintf("auth/slurm: '%s' owned by uid=%d, instead of SlurmUser(%d) or root", path, st.Uid, slurmUser)
	}
	if perm := fi.Mode().Perm(); perm&0o007 != 0 {
		return warning, keyErrorf("auth/slurm: key file is insecure: '%s' mode=0%o", path, perm)
	}
	return warning, nil
}

// readKeyFile reads the whole file. Stock mmaps it, so an empty file or a
// directory fails the same way ("Could not load key file").
func readKeyFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(path)
	}
	if err == nil && len(data) == 0 {
		err = errors.New("empty file")
	}
	if err != nil {
		return nil, &keyError{msg: fmt.Sprintf("auth/slurm: Could not load key file (%s)", path)}
	}
	return data, nil
}

// errnoText is glibc's strerror text for err (what %m prints): Go's errno
// texts are glibc's with a lower-case first letter.
func errnoText(err error) string {
	var errno syscall.Errno
	var pe *fs.PathError
	msg := err.Error()
	switch {
	case errors.As(err, &errno):
		msg = errno.Error()
	case errors.As(err, &pe):
		msg = pe.Err.Error()
	}
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return msg
}

// jwksKey is one entry of slurm.jwks. Values are kept raw to tell a
// missing field from one of the wrong type, as stock's data_get_string.
type jwksKey struct {
	KID json.RawMessage `json:"kid"`
	KTY json.RawMessage `json:"kty"`
	Alg json.RawMessage `json:"alg"`
	K   json.RawMessage `json:"k"`
	Use json.RawMessage `json:"use"`
	Exp json.RawMessage `json:"exp"`
}

// parseJWKS reads slurm.jwks: {"keys":[{kid,kty=oct,alg=HS256,k,use?,exp?}]}.
// Error texts are stock's (_read_keys_file, _build_key_list).
func parseJWKS(data []byte, path string) (*KeySet, error) {
	var doc struct {
		Keys *[]jwksKey `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, keyErrorf("_read_keys_file: failed to deserialize keys file `%s`", path)
	}
	if doc.Keys == nil {
		return nil, keyErrorf("_read_keys_file: jwks file invalid")
	}
	set := &KeySet{Path: path, JWKS: true, signWith: -1}
	for _, jk := range *doc.Keys {
		kid, ok := jwtclaim.String(jk.KID)
		if !ok {
			return nil, keyErrorf("_build_key_list: failed to load kid field")
		}
		for _, k := range set.keys {
			if k.ID == kid {
				return nil, keyErrorf("_build_key_list: kid fields must be unique")
			}
		}
		kty, ok := jwtclaim.String(jk.KTY)
		if !ok {
			return nil, keyErrorf("_build_key_list: failed to load kty field")
		}
		if !strings.EqualFold(kty, "oct") {
			return nil, keyErrorf("_build_key_list: kty field must be oct")
		}
		alg, ok := jwtclaim.String(jk.Alg)
		if !ok {
			return nil, keyErrorf("_build_key_list: failed to load alg field")
		}
		if !strings.EqualFold(alg, "HS256") {
			return nil, keyErrorf("_build_key_list: alg field must be HS256")
		}
		k, ok := jwtclaim.String(jk.K)
		if !ok {
			return nil, keyErrorf("_build_key_list: failed to load key field")
		}
		secret, err := decodeJWKSKey(k)
		if err != nil {
			return nil, keyErrorf("_build_key_list: key failed to decode")
		}
		if len(secret) < minJWKSKeyLen {
			return nil, keyErrorf("_build_key_list: key lacks sufficient entropy")
		}
		key := Key{ID: kid, Secret: secret}
		if use, ok := jwtclaim.String(jk.Use); ok && strings.EqualFold(use, "default") {
			if set.signWith >= 0 {
				return nil, keyErrorf("_build_key_list: multiple default keys defined")
			}
			set.signWith = len(set.keys)
		}
		if len(jk.Exp) > 0 && string(jk.Exp) != "null" {
			exp, err := jsonInt(jk.Exp)
			if err != nil {
				return nil, keyErrorf("_build_key_list: invalid value for exp")
			}
			key.Expires = time.Unix(exp, 0)
		}
		set.keys = append(set.keys, key)
	}
	if len(set.keys) == 0 {
		// Stock starts with no default key and dies at its first token.
		return nil, keyErrorf("default_key or this_hostname missing")
	}
	if set.signWith < 0 {
		set.signWith = 0 // stock: the first key in the file
	}
	return set, nil
}

// decodeJWKSKey decodes "k": base64url (stock converts it to base64 first,
// so standard base64 and padding are accepted too).
func decodeJWKSKey(k string) ([]byte, error) {
	k = strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimRight(k, "="))
	return base64.RawStdEncoding.DecodeString(k)
}

// jsonInt reads an integer the way Slurm's data_get_int_converted does for
// exp: a JSON integer, or a string holding one.
func jsonInt(raw json.RawMessage) (int64, error) {
	if s, ok := jwtclaim.String(raw); ok {
		return strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	}
	return strconv.ParseInt(string(raw), 10, 64)
}
