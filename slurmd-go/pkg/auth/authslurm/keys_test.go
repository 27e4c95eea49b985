package authslurm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The texts are what stock 24.11.5 and 26.05.5 slurmd print (fatal: ...)
// for the same files, measured in the chroots (see the package report):
// neither release has a minimum length for slurm.key, a one-byte key works.
func TestLoadKeys_Files(t *testing.T) {
	good := strings.Repeat("k", 1024)
	jwk := func(extra string) string {
		return `{"keys":[{"alg":"HS256","kty":"oct","kid":"a","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"` + extra + `}]}`
	}
	cases := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		errMsg string // "" = loads
		jwks   bool
		keyLen int
	}{
		{"missing", func(t *testing.T, dir string) {}, "auth/slurm: cannot stat '%d/slurm.key': No such file or directory", false, 0},
		{"empty", file("slurm.key", "", 0o600), "auth/slurm: Could not load key file (%d/slurm.key)", false, 0},
		{"world-readable", file("slurm.key", good, 0o604), "auth/slurm: key file is insecure: '%d/slurm.key' mode=0604", false, 0},
		{"other-exec", file("slurm.key", good, 0o601), "auth/slurm: key file is insecure: '%d/slurm.key' mode=0601", false, 0},
		{"directory", func(t *testing.T, dir string) { os.Mkdir(filepath.Join(dir, "slurm.key"), 0o700) }, "auth/slurm: Could not load key file (%d/slurm.key)", false, 0},
		{"group-readable", file("slurm.key", good, 0o640), "", false, 1024},
		{"one byte", file("slurm.key", "x", 0o600), "", false, 1},
		{"jwks first", func(t *testing.T, dir string) {
			file("slurm.key", good, 0o600)(t, dir)
			file("slurm.jwks", jwk(""), 0o600)(t, dir)
		}, "", true, 24},
		{"jwks world-readable", file("slurm.jwks", jwk(""), 0o644), "auth/slurm: key file is insecure: '%d/slurm.jwks' mode=0644", false, 0},
		{"jwks short key", file("slurm.jwks", `{"keys":[{"alg":"HS256","kty":"oct","kid":"a","k":"c2hvcnQ"}]}`, 0o600), "_build_key_list: key lacks sufficient entropy", false, 0},
		{"jwks no kid", file("slurm.jwks", `{"keys":[{"alg":"HS256","kty":"oct","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"}]}`, 0o600), "_build_key_list: failed to load kid field", false, 0},
		{"jwks kty", file("slurm.jwks", `{"keys":[{"alg":"HS256","kty":"RSA","kid":"a","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"}]}`, 0o600), "_build_key_list: kty field must be oct", false, 0},
		{"jwks alg", file("slurm.jwks", `{"keys":[{"alg":"RS256","kty":"oct","kid":"a","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"}]}`, 0o600), "_build_key_list: alg field must be HS256", false, 0},
		{"jwks no k", file("slurm.jwks", `{"keys":[{"alg":"HS256","kty":"oct","kid":"a"}]}`, 0o600), "_build_key_list: failed to load key field", false, 0},
		{"jwks dup kid", file("slurm.jwks", `{"keys":[{"alg":"HS256","kty":"oct","kid":"a","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"},{"alg":"HS256","kty":"oct","kid":"a","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3"}]}`, 0o600), "_build_key_list: kid fields must be unique", false, 0},
		{"jwks two defaults", file("slurm.jwks", `{"keys":[{"alg":"HS256","kty":"oct","kid":"a","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3","use":"default"},{"alg":"HS256","kty":"oct","kid":"b","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3","use":"default"}]}`, 0o600), "_build_key_list: multiple default keys defined", false, 0},
		{"jwks no keys", file("slurm.jwks", `{"nokeys":[]}`, 0o600), "_read_keys_file: jwks file invalid", false, 0},
		{"jwks not JSON", file("slurm.jwks", `{"keys":[`, 0o600), "_read_keys_file: failed to deserialize keys file `%d/slurm.jwks`", false, 0},
		{"jwks bad exp", file("slurm.jwks", jwk(`,"exp":"soon"`), 0o600), "_build_key_list: invalid value for exp", false, 0},
		{"jwks empty list", file("slurm.jwks", `{"keys":[]}`, 0o600), "default_key or this_hostname missing", false, 0},
		{"jwks case-insensitive kty/alg", file("slurm.jwks", `{"keys":[{"alg":"hs256","kty":"OCT","kid":"a","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3","exp":"1796118000"}]}`, 0o600), "", true, 24},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			key, jw := KeyPaths(filepath.Join(dir, "slurm.conf"), func(string) string { return "" })
			set, _, err := LoadKeys(LoadOptions{KeyFile: key, JWKSFile: jw})
			if tc.errMsg != "" {
				want := strings.ReplaceAll(tc.errMsg, "%d", dir)
				if !errors.Is(err, ErrKey) || err.Error() != want {
					t.Fatalf("err %v\nwant %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if set.JWKS != tc.jwks || len(set.Signing().Secret) != tc.keyLen {
				t.Fatalf("set %+v, key %d bytes", set, len(set.Signing().Secret))
			}
		})
	}
}

func file(name, content string, mode os.FileMode) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
}

func TestLoadKeys_OwnerWarning(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to chown the key (the test suite runs as root)")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "slurm.key")
	file("slurm.key", "key", 0o600)(t, dir)
	if err := os.Chown(p, 65534, -1); err != nil {
		t.Fatal(err)
	}
	_, w, err := LoadKeys(LoadOptions{KeyFile: p, SlurmUserID: 64030})
	if err != nil || len(w) != 1 || w[0] != "auth/slurm: '"+p+"' owned by uid=65534, instead of SlurmUser(64030) or root" {
		t.Fatalf("%v %q", err, w)
	}
	// SlurmUser=root: no warning, as stock.
	if _, w, err := LoadKeys(LoadOptions{KeyFile: p}); err != nil || len(w) != 0 {
		t.Fatalf("%v %q", err, w)
	}
}

func TestKeyPaths(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if k, j := KeyPaths("/etc/slurm/slurm.conf", get); k != "/etc/slurm/slurm.key" || j != "/etc/slurm/slurm.jwks" {
		t.Fatal(k, j)
	}
	env[EnvKey], env[EnvJWKS] = "/run/k", "/run/j"
	if k, j := KeyPaths("/etc/slurm/slurm.conf", get); k != "/run/k" || j != "/run/j" {
		t.Fatal(k, j)
	}
}
