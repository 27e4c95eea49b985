package bcast

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/pierrec/lz4/v4"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authtest"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

const testNode = "n2"

// env is a server for node n2 with a munge stand-in that signs as root, and
// the uid/gid of user nobody, whose transfers the tests send.
type env struct {
	s        *Server
	fake     *authtest.Fake
	uid, gid uint32
	dir      string // a directory nobody may write in
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("files are created with the user's identity, which needs root: run as root (make test and CI do)")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("user nobody (Debian base-passwd) is missing: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	e := &env{fake: authtest.New(0, 0), uid: uint32(uid), gid: uint32(gid), dir: t.TempDir()}
	_ = os.Chmod(filepath.Dir(e.dir), 0o755)
	if err := os.Chmod(e.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Hour)
	e.s = New(func() Config {
		return Config{NodeName: testNode, Auth: e.fake, Started: started}
	}, hclog.NewNullLogger())
	return e
}

// cred is a signed sbcast credential of job 77 step 0 for n[1-4].
func (e *env) cred(t *testing.T, v uint16, spoil func(c *slurmproto.SbcastCred)) *slurmproto.SbcastCred {
	t.Helper()
	c := &slurmproto.SbcastCred{
		StepID:     slurmproto.StepID{JobID: 77, StepID: 0, StepHetComp: slurmproto.NoVal},
		Identity:   slurmproto.Identity{UID: e.uid, GID: e.gid, PwName: "nobody", Gids: []uint32{e.gid}},
		CTime:      time.Now().Truncate(time.Second),
		Expiration: time.Now().Add(time.Hour).Truncate(time.Second),
		Nodes:      "n[1-4]",
	}
	fields, err := c.PackFields(v)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := e.fake.Encode(context.Background(), fields, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Signed, c.Signature = fields, append([]byte(sig), 0)
	if spoil != nil {
		spoil(c)
	}
	return c
}

// blocks cuts data into blocks of n bytes as sbcast does, lz4-compressed
// when compress is set.
func blocks(t *testing.T, data []byte, n int, compress bool, fname string, flags uint16, c *slurmproto.SbcastCred) []*slurmproto.FileBcast {
	t.Helper()
	var out []*slurmproto.FileBcast
	for off := 0; off == 0 || off < len(data); off += n {
		chunk := data[off:min(off+n, len(data))]
		m := &slurmproto.FileBcast{BlockNo: uint32(len(out) + 1), Flags: flags, Modes: 0o100750, FName: fname,
			UncompLen: uint32(len(chunk)), BlockOffset: uint64(off), FileSize: uint64(len(data)), Block: chunk, Cred: c,
			ATime: time.Unix(1_600_000_000, 0), MTime: time.Unix(1_500_000_000, 0)}
		if compress && len(chunk) > 0 {
			buf := make([]byte, lz4.CompressBlockBound(len(chunk)))
			k, err := lz4.CompressBlock(chunk, buf, nil)
			if err != nil || k == 0 {
				t.Fatalf("lz4: %d %v", k, err)
			}
			m.Compress, m.Block = slurmproto.CompressLZ4, buf[:k]
		}
		out = append(out, m)
		if off+n >= len(data) {
			m.Flags |= slurmproto.FileBcastLastBlock
			break
		}
	}
	return out
}

func (e *env) send(t *testing.T, v uint16, ms []*slurmproto.FileBcast) Result {
	t.Helper()
	for _, m := range ms {
		if r := e.s.Serve(context.Background(), Request{Version: v, UID: e.uid, GID: e.gid, Msg: m}); r != (Result{}) {
			return r
		}
	}
	return Result{}
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/1000)
	}
	return b
}

// TestServe_File: every block lands in order, compressed or not, and the
// last one gives the file the source's permission bits, the user as owner
// and the sent times.
func TestServe_File(t *testing.T) {
	for _, v := range []uint16{slurmproto.Version2205, slurmproto.Version2411, slurmproto.Version2605} {
		for _, compress := range []bool{false, true} {
			t.Run(slurmproto.ReleaseName(v)+map[bool]string{false: "/plain", true: "/lz4"}[compress], func(t *testing.T) {
				e := newEnv(t)
				data := payload(300_001)
				fname := filepath.Join(e.dir, "copy")
				if r := e.send(t, v, blocks(t, data, 65536, compress, fname, 0, e.cred(t, v, nil))); r != (Result{}) {
					t.Fatalf("answer %+v", r)
				}
				// Stat first: reading the copy may move its atime.
				var st syscall.Stat_t
				if err := syscall.Stat(fname, &st); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(fname)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("copy differs (%d bytes, %v)", len(got), err)
				}
				if st.Uid != e.uid || st.Gid != e.gid || st.Mode&0o7777 != 0o750 || st.Mtim.Sec != 1_500_000_000 || st.Atim.Sec != 1_600_000_000 {
					t.Fatalf("copy %d:%d mode %o mtime %d atime %d", st.Uid, st.Gid, st.Mode&0o7777, st.Mtim.Sec, st.Atim.Sec)
				}
				if len(e.s.files) != 0 {
					t.Fatalf("transfer still open after the last block: %v", e.s.files)
				}
			})
		}
	}
}

// TestServe_Refused: what stock refuses, with its code.
func TestServe_Refused(t *testing.T) {
	v22, v24 := slurmproto.Version2205, slurmproto.Version2411
	badCred := Result{RC: slurmproto.ESlurmdInvalidJobCredential}
	malformed := Result{RC: slurmproto.ESlurmProtocolIncompletePacket, Malformed: true}
	spoilFields := func(c *slurmproto.SbcastCred) {
		c.Signed = append([]byte(nil), c.Signed...)
		c.Signed[len(c.Signed)-2] ^= 1
	}
	expired := func(c *slurmproto.SbcastCred) { c.Expiration = time.Now().Add(-time.Minute) }
	for _, tc := range []struct {
		name   string
		v      uint16
		spoil  func(c *slurmproto.SbcastCred)
		resign bool
		want   Result
	}{
		{"22.05 signature over other bytes", v22, spoilFields, false, badCred},
		{"24.11 signature over other bytes", v24, spoilFields, false, malformed},
		{"22.05 expired", v22, expired, true, badCred},
		{"24.11 expired", v24, expired, true, malformed},
		{"22.05 node not in the credential", v22, func(c *slurmproto.SbcastCred) { c.Nodes = "n[5-6]" }, true, badCred},
		{"24.11 node not in the credential", v24, func(c *slurmproto.SbcastCred) { c.Nodes = "n9" }, true, badCred},
		{"credential of another user", v24, func(c *slurmproto.SbcastCred) { c.UID = 0 }, true, badCred},
		{"not signed", v22, func(c *slurmproto.SbcastCred) { c.Signature = []byte{0} }, false, badCred},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.cred(t, tc.v, tc.spoil)
			if tc.resign {
				// Only the checked field is wrong: the signature covers it.
				f, err := c.PackFields(tc.v)
				if err != nil {
					t.Fatal(err)
				}
				sig, _ := e.fake.Encode(context.Background(), f, 0)
				c.Signed, c.Signature = f, append([]byte(sig), 0)
			}
			fname := filepath.Join(e.dir, "copy")
			if r := e.send(t, tc.v, blocks(t, []byte("data"), 512, false, fname, 0, c)); r != tc.want {
				t.Fatalf("answer %+v, want %+v", r, tc.want)
			}
			if _, err := os.Stat(fname); err == nil {
				t.Fatal("file created for a refused credential")
			}
		})
	}
	t.Run("signed by an ordinary user", func(t *testing.T) {
		e := newEnv(t)
		c := e.cred(t, v22, nil)
		c.Signature = append([]byte(authtest.Forge(e.uid, e.gid, 0, c.Signed, time.Now(), 9)), 0)
		if r := e.send(t, v22, blocks(t, []byte("x"), 512, false, filepath.Join(e.dir, "u"), 0, c)); r != badCred {
			t.Fatalf("answer %+v", r)
		}
	})
	// 22.05 looks a later block's credential up in its cache of verified
	// signatures first; 24.11 only finds no transfer.
	t.Run("a later block without its first", func(t *testing.T) {
		for v, want := range map[uint16]Result{v22: badCred, v24: {RC: slurmproto.SlurmError}} {
			e := newEnv(t)
			bs := blocks(t, payload(2000), 1000, false, filepath.Join(e.dir, "late"), 0, e.cred(t, v, nil))
			if r := e.send(t, v, bs[1:]); r != want {
				t.Fatalf("%s: answer %+v, want %+v", slurmproto.ReleaseName(v), r, want)
			}
		}
	})
	t.Run("22.05 unknown signature on a later block, long after start", func(t *testing.T) {
		e := newEnv(t)
		bs := blocks(t, payload(2000), 1000, false, filepath.Join(e.dir, "two"), 0, e.cred(t, v22, nil))
		if r := e.send(t, v22, bs[:1]); r != (Result{}) {
			t.Fatalf("first block: %+v", r)
		}
		bs[1].Cred = e.cred(t, v22, nil) // a fresh, valid signature never seen here
		if r := e.send(t, v22, bs[1:]); r != badCred {
			t.Fatalf("answer %+v", r)
		}
	})
	t.Run("a file that exists, without and with force", func(t *testing.T) {
		e := newEnv(t)
		fname := filepath.Join(e.dir, "there")
		if err := os.WriteFile(fname, []byte("old contents, longer"), 0o666); err != nil {
			t.Fatal(err)
		}
		_ = os.Chown(fname, int(e.uid), int(e.gid))
		c := e.cred(t, v22, nil)
		if r := e.send(t, v22, blocks(t, []byte("new"), 512, false, fname, 0, c)); r != (Result{RC: slurmproto.EEXIST}) {
			t.Fatalf("without force: %+v", r)
		}
		if r := e.send(t, v22, blocks(t, []byte("new"), 512, false, fname, slurmproto.FileBcastForce, c)); r != (Result{}) {
			t.Fatalf("with force: %+v", r)
		}
		if b, _ := os.ReadFile(fname); string(b) != "new" {
			t.Fatalf("contents %q", b)
		}
	})
	t.Run("a directory only root may write", func(t *testing.T) {
		e := newEnv(t)
		dir := filepath.Join(e.dir, "rootonly")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if r := e.send(t, v22, blocks(t, []byte("x"), 512, false, filepath.Join(dir, "f"), 0, e.cred(t, v22, nil))); r != (Result{RC: uint32(syscall.EACCES)}) {
			t.Fatalf("answer %+v", r)
		}
	})
}

// TestServe_PerNodeName: a destination ending in '/' gets the node's name
// (srun --bcast=<dir>/).
func TestServe_PerNodeName(t *testing.T) {
	e := newEnv(t)
	v := slurmproto.Version2205
	if r := e.send(t, v, blocks(t, []byte("#!/bin/sh\n"), 512, false, e.dir+"/", slurmproto.FileBcastForce, e.cred(t, v, nil))); r != (Result{}) {
		t.Fatalf("answer %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(e.dir, "slurm_bcast_77.0_"+testNode)); err != nil || string(b) != "#!/bin/sh\n" {
		t.Fatalf("per-node copy: %q %v", b, err)
	}
}

// TestServe_SendLibs: an executable with FILE_BCAST_EXE gets its _libs
// directory, and the libraries that follow land in it.
func TestServe_SendLibs(t *testing.T) {
	for _, v := range []uint16{slurmproto.Version2205, slurmproto.Version2411} {
		t.Run(slurmproto.ReleaseName(v), func(t *testing.T) {
			e := newEnv(t)
			c := e.cred(t, v, nil)
			exe := filepath.Join(e.dir, "prog")
			if r := e.send(t, v, blocks(t, []byte("ELF"), 512, false, exe, slurmproto.FileBcastExe, c)); r != (Result{}) {
				t.Fatalf("exe: %+v", r)
			}
			lib := blocks(t, []byte("lib"), 512, false, "libx.so", slurmproto.FileBcastSO, c)
			lib[0].ExeFName = exe
			if r := e.send(t, v, lib); r != (Result{}) {
				t.Fatalf("library: %+v", r)
			}
			if b, err := os.ReadFile(filepath.Join(exe+"_libs", "libx.so")); err != nil || string(b) != "lib" {
				t.Fatalf("library copy: %q %v", b, err)
			}
			if d := e.s.LibDirs(e.uid, 77, 0); !slices.Equal(d, []string{exe + "_libs"}) {
				t.Fatalf("LibDirs %q", d)
			}
			e.s.JobEnded(77)
			if d := e.s.LibDirs(e.uid, 77, 0); len(d) != 0 {
				t.Fatal("library directory kept after the job ended")
			}
		})
	}
}

// TestServe_Token: a cred/slurm sbcast credential (24.11 on) is served when
// the cluster's key signed it; another key's is refused while unpacking.
func TestServe_Token(t *testing.T) {
	v := slurmproto.Version2411
	signer := func(t *testing.T, secret string) *authslurm.Auth {
		keys, err := authslurm.NewKeySet(false, authslurm.Key{Secret: []byte(secret)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := authslurm.New(authslurm.Config{Keys: keys, IDs: &authslurm.IDs{}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ours := signer(t, "this cluster's slurm.key")
	for _, tc := range []struct {
		name string
		key  *authslurm.Auth
		want Result
	}{
		{"the cluster's key", ours, Result{}},
		{"another key", signer(t, "another cluster's key"), Result{RC: slurmproto.ESlurmProtocolIncompletePacket, Malformed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.s.config = func() Config { return Config{NodeName: testNode, Auth: e.fake, Tokens: ours} }
			tok, err := tc.key.MintSbcast(authslurm.SbcastGrant{Nodes: "n[1-4]", JobID: 77, StepID: 0}, e.uid, e.gid, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Through the codec: the fields come from the token's claims.
			fname := filepath.Join(e.dir, "tok")
			body, err := slurmproto.EncodeBody(v, blocks(t, []byte("token"), 512, false, fname, 0, &slurmproto.SbcastCred{Token: tok})[0])
			if err != nil {
				t.Fatal(err)
			}
			m, err := slurmproto.DecodeBody(v, slurmproto.RequestFileBcast, body)
			if err != nil {
				t.Fatal(err)
			}
			if r := e.send(t, v, []*slurmproto.FileBcast{m.(*slurmproto.FileBcast)}); r != tc.want {
				t.Fatalf("answer %+v, want %+v", r, tc.want)
			}
			if _, err := os.Stat(fname); (err == nil) != (tc.want == Result{}) {
				t.Fatalf("file after answer %+v: %v", tc.want, err)
			}
		})
	}
}

// TestServe_SendLibsDirExists: an existing library directory is refused
// (EEXIST) by 22.05; from 24.11 --force replaces it, contents and all.
func TestServe_SendLibsDirExists(t *testing.T) {
	for v, want := range map[uint16]Result{slurmproto.Version2205: {RC: slurmproto.EEXIST}, slurmproto.Version2411: {}} {
		t.Run(slurmproto.ReleaseName(v), func(t *testing.T) {
			e := newEnv(t)
			exe := filepath.Join(e.dir, "prog")
			if err := os.Mkdir(exe+"_libs", 0o777); err != nil {
				t.Fatal(err)
			}
			// A stale library, and a link out of the directory whose target
			// must survive (stock's nftw does not follow links).
			stale := filepath.Join(exe+"_libs", "stale.so")
			outside := filepath.Join(e.dir, "outside")
			for _, f := range []string{stale, outside} {
				if err := os.WriteFile(f, []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(outside, filepath.Join(exe+"_libs", "link")); err != nil {
				t.Fatal(err)
			}
			// The user's own directory, as a broadcast before this one left it.
			for _, f := range []string{exe + "_libs", stale, filepath.Join(exe+"_libs", "link")} {
				if err := os.Lchown(f, int(e.uid), int(e.gid)); err != nil {
					t.Fatal(err)
				}
			}
			if r := e.send(t, v, blocks(t, []byte("ELF"), 512, false, exe, slurmproto.FileBcastExe|slurmproto.FileBcastForce, e.cred(t, v, nil))); r != want {
				t.Fatalf("answer %+v, want %+v", r, want)
			}
			left, err := os.ReadDir(exe + "_libs")
			if err != nil {
				t.Fatal(err)
			}
			if want.RC == 0 && len(left) != 0 {
				t.Fatalf("--force kept %d entries of the old library directory (%s ...)", len(left), left[0].Name())
			}
			if want.RC != 0 && len(left) != 2 {
				t.Fatalf("a refused broadcast changed the directory: %d entries left", len(left))
			}
			if b, err := os.ReadFile(outside); err != nil || string(b) != "old" {
				t.Fatalf("the link's target: %q %v", b, err)
			}
		})
	}
}

// TestServe_OpenOutrunsBound: a first block whose open does not finish
// within the bound is refused, and the open that finishes later leaves no
// descriptor behind. A FIFO's open blocks until a reader comes; once the
// reader is there it must see end of file, not a writer that stays.
func TestServe_OpenOutrunsBound(t *testing.T) {
	e := newEnv(t)
	e.s.ioTimeout = 50 * time.Millisecond
	fifo := filepath.Join(e.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fifo, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	v := slurmproto.Version2205
	r := e.send(t, v, blocks(t, payload(10), 64, false, fifo, slurmproto.FileBcastForce, e.cred(t, v, nil)))
	if r.RC != slurmproto.SlurmError {
		t.Fatalf("answer %+v, want SLURM_ERROR for an open past its bound", r)
	}
	rd, err := os.OpenFile(fifo, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if err := rd.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := rd.Read(make([]byte, 16)); !errors.Is(err, io.EOF) {
		t.Fatalf("read %d bytes, %v: the late open's descriptor is still open", n, err)
	}
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	if len(e.s.files) != 0 {
		t.Fatalf("transfers %v registered after a failed open", e.s.files)
	}
}

// TestServe_LastBlockWriteFails: a last block that cannot be written is
// answered SLURM_ERROR, as stock answers it, and its file is closed at once
// rather than at the stall sweep (/dev/full refuses every write).
func TestServe_LastBlockWriteFails(t *testing.T) {
	e := newEnv(t)
	v := slurmproto.Version2205
	r := e.send(t, v, blocks(t, payload(10), 64, false, "/dev/full", slurmproto.FileBcastForce, e.cred(t, v, nil)))
	if r.RC != slurmproto.SlurmError {
		t.Fatalf("answer %+v, want SLURM_ERROR", r)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink("/proc/self/fd/" + fd.Name()); target == "/dev/full" {
			t.Fatalf("descriptor %s on /dev/full still open after the failed last block", fd.Name())
		}
	}
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	if len(e.s.files) != 0 {
		t.Fatalf("transfers %v kept after the failed last block", e.s.files)
	}
}

// TestLookupGroups: a credential without groups gets the user's from the
// node, primary gid first; a user the node does not know keeps the primary
// gid alone (group_cache_lookup).
func TestLookupGroups(t *testing.T) {
	u, err := user.Lookup("root")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := u.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	got := lookupGroups(0, 0)
	if len(got) == 0 || got[0] != 0 || len(got) != len(ids) {
		t.Fatalf("groups of root %v, want gid 0 first and %d in all (%v)", got, len(ids), ids)
	}
	if got := lookupGroups(4_000_000_000, 4242); !slices.Equal(got, []uint32{4242}) {
		t.Fatalf("groups of an unknown uid %v, want [4242]", got)
	}
}
