//go:build integration

// sbcast and srun --bcast end to end, compared with the stock slurmd in the same run.
//
// The four nodes of a test cluster share this host, so one destination path is one
// file for all of them. That shapes the test, after what stock does:
//   - sbcast -f (--force): each node opens the path O_TRUNC and writes every block at
//     the same offset (sbcast sends block n+1 only once every node answered block n), so
//     the shared file ends up whole; each node's log names the file (each served it).
//   - sbcast without -f: one node wins the O_EXCL create, the three others answer
//     EEXIST ("File exists"), and sbcast fails; the winner's copy is whole.
//   - srun --bcast=<dir>/: each node writes its own slurm_bcast_<job>.<step>_<node>
//     and the step manager execs that copy: per-node files, checked one by one.
//
// Then --send-libs (srun, then sbcast) of a dynamic executable, whose outcome differs
// per release (see testSbcastBroadcast).
//
// One batch job of tieeuser per cluster (4 nodes) does the broadcasting; the test then
// checks bytes, permission bits, owner and times (--preserve; srun --bcast always
// preserves) against the source, on both clusters. The source's atime lies in the
// future so that reading it (relatime) never moves it while sbcast runs.
//
// Run alone: sudo TIEE_SLURMD_IMPL=stock go test -tags integration -count=1 -v
// -run TestSbcast ./slurmd-go/integration/
package integration

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth/authslurm"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

const (
	sbcastBigSize    = 100 << 20                          // the large file
	sbcastJobTimeout = 5 * time.Minute                    // the broadcasting job: 2x100 MiB to 4 nodes, 3 sruns (loaded 2 CPUs)
	sbcastSeed       = "sbcast-big-file-seed-0123456789a" // 32 bytes: ChaCha8 seed of the big file
)

// sbcastScript broadcasts as the job's user from its first node.
const sbcastScript = `#!/bin/bash
mkdir -p dst/bin dst/binz
sbcast -f -p -s 256k src/big dst/big.plain; echo "sbcast-plain $?"
sbcast -f -p -C --fanout=2 src/big dst/big.lz4; echo "sbcast-lz4 $?"
sbcast -f -p src/prog dst/prog; echo "sbcast-prog $?"
sbcast src/small dst/excl > excl.err 2>&1; echo "sbcast-excl $? $(grep -c 'File exists' excl.err)"
srun -N4 -n4 --bcast=$PWD/dst/bin/ src/prog; echo "srun-bcast $?"
srun -N4 -n4 --bcast=$PWD/dst/binz/ --compress=lz4 src/prog; echo "srun-bcast-lz4 $?"
srun -N4 -n4 $PWD/dst/prog; echo "srun-prog $?"
mkdir -p dst/libs
srun -N4 -n4 --bcast=$PWD/dst/libs/ --send-libs --bcast-exclude=NONE src/printenv LD_LIBRARY_PATH; echo "srun-libs $?"
sbcast --send-libs --exclude=NONE src/printenv dst/printenv > libs.err 2>&1; echo "sbcast-libs $? $(grep -c 'File exists' libs.err)"
`

// srunStepWait matches what srun prints when its step waits for the resources of the
// step before it to be released (load, not the daemon).
var srunStepWait = regexp.MustCompile(`^srun: (Job \S+ step creation (temporarily|still) disabled, retrying.*|Step created for (StepId=|job )\S+)$`)

// sbcastProg is the small executable: it says where it runs and which copy ran.
const sbcastProg = "#!/bin/sh\necho \"prog $SLURM_PROCID on $SLURMD_NODENAME as $(id -un) from $0\"\n"

// sbcastSource are the files to broadcast and the times they carry.
type sbcastSource struct {
	dir          string
	atime, mtime time.Time
	sum          map[string][32]byte // file -> sha256
}

// makeSbcastSource writes src/{big,prog,small} into dir, owned by TestUser.
func makeSbcastSource(t *testing.T, dir string) sbcastSource {
	t.Helper()
	uid, gid, err := cluster.LookupUser(cluster.TestUser)
	if err != nil {
		t.Fatal(err)
	}
	s := sbcastSource{dir: filepath.Join(dir, "src"), sum: map[string][32]byte{},
		mtime: time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC),
		atime: time.Now().Add(30 * 24 * time.Hour).Truncate(time.Second)}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, mode os.FileMode, fill func(w io.Writer) error) {
		p := filepath.Join(s.dir, name)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		bw := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
		err = fill(bw)
		if err == nil {
			err = bw.Flush()
		}
		if err := joinErr(err, f.Close()); err != nil {
			t.Fatal(err)
		}
		s.sum[name] = [32]byte(h.Sum(nil))
		if err := joinErr(os.Chmod(p, mode), os.Chown(p, uid, gid), os.Chtimes(p, s.atime, s.mtime)); err != nil {
			t.Fatal(err)
		}
	}
	// Half random, half text, in 1 MiB runs: lz4 has something to do, and fails on
	// nothing.
	write("big", 0o640, func(w io.Writer) error {
		var seed [32]byte
		copy(seed[:], sbcastSeed)
		rnd := rand.NewChaCha8(seed)
		text := []byte(strings.Repeat("sbcast block of compressible text, ", 1<<15)[:1<<20])
		buf := make([]byte, 1<<20)
		for i := range sbcastBigSize >> 20 {
			chunk := text
			if i%2 == 0 {
				_, _ = rnd.Read(buf)
				chunk = buf
			}
			if _, err := w.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	})
	write("prog", 0o755, func(w io.Writer) error { _, err := io.WriteString(w, sbcastProg); return err })
	write("small", 0o600, func(w io.Writer) error { _, err := io.WriteString(w, "small file\n"); return err })
	// A dynamic executable for --send-libs (ldd finds its libraries).
	write("printenv", 0o755, func(w io.Writer) error {
		f, err := os.Open("/usr/bin/printenv")
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	return s
}

func joinErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// checkCopy compares a broadcast copy with its source: bytes, permission bits,
// owner, and (preserve) the source's times. Stat comes first: reading may move atime.
func checkCopy(t *testing.T, label, path string, src sbcastSource, name string, mode uint32, preserve bool) {
	t.Helper()
	uid, gid, err := cluster.LookupUser(cluster.TestUser)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Errorf("%s: %v", label, err)
		return
	}
	if st.Mode&0o7777 != mode || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("%s: %s mode %o owner %d:%d, want %o %d:%d", label, path, st.Mode&0o7777, st.Uid, st.Gid, mode, uid, gid)
	}
	if preserve && (st.Mtim.Sec != src.mtime.Unix() || st.Atim.Sec != src.atime.Unix()) {
		t.Errorf("%s: %s mtime %d atime %d, want the source's %d %d", label, path, st.Mtim.Sec, st.Atim.Sec, src.mtime.Unix(), src.atime.Unix())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("%s: %v", label, err)
		return
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Errorf("%s: %v", label, err)
	}
	if [32]byte(h.Sum(nil)) != src.sum[name] {
		t.Errorf("%s: %s (%d bytes) differs from src/%s", label, path, st.Size, name)
	}
}

// TestSbcast: tieeuser broadcasts a 100 MiB file (plain, in 256 KiB blocks, and lz4
// through a fan-out of 2) and a small executable to 4 nodes with sbcast and srun
// --bcast (plain and lz4); the copies and srun's output are those of the stock slurmd.
// Then spoiled sbcast credentials, sent straight to a node, get stock's answers and the
// daemon keeps serving.
func TestSbcast(t *testing.T) {
	p := startPair(t, srunOptions)
	var src sbcastSource
	dirs := map[*cluster.Cluster]string{}
	for i, c := range p.both() {
		dirs[c] = c.WorkDir(t, cluster.TestUser, "sbcast")
		if i == 0 {
			src = makeSbcastSource(t, dirs[c])
			continue
		}
		// The same files for the other cluster: hard links (one write of 100 MiB).
		if err := os.MkdirAll(filepath.Join(dirs[c], "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name := range src.sum {
			if err := os.Link(filepath.Join(src.dir, name), filepath.Join(dirs[c], "src", name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("Broadcast", func(t *testing.T) { testSbcastBroadcast(t, p, dirs, src) })
	t.Run("BadCredentials", func(t *testing.T) { testSbcastBadCredentials(t, p) })
}

func testSbcastBroadcast(t *testing.T, p pair, dirs map[*cluster.Cluster]string, src sbcastSource) {
	jobs := map[*cluster.Cluster]string{}
	for _, c := range p.both() {
		jobs[c] = c.SbatchIn(t, cluster.TestUser, dirs[c], sbcastScript, "-p", srunPartition, "-N4", "-J", "sbcast", "-o", "out")
	}
	lines := map[*cluster.Cluster][]string{}
	for _, c := range p.both() {
		label := p.label(c)
		f := c.WaitJob(t, jobs[c], sbcastJobTimeout, cluster.JobTerminalStates...)
		text, _ := readJobFile(t, filepath.Join(dirs[c], "out"))
		if f["JobState"] != "COMPLETED" || f["ExitCode"] != "0:0" {
			t.Errorf("%s: job %s %s ExitCode=%s, want COMPLETED 0:0; output:\n%s", label, jobs[c], f["JobState"], f["ExitCode"], text)
		}
		lines[c] = slices.DeleteFunc(sortedLines(normalizer(c, map[string]string{jobs[c]: "<JOB>"})(text)), func(l string) bool {
			if srunStepWait.MatchString(l) {
				t.Logf("%s: srun waited for the previous step's resources, not compared: %q", label, l)
				return true
			}
			return false
		})
		d := filepath.Join(dirs[c], "dst")
		checkCopy(t, label, filepath.Join(d, "big.plain"), src, "big", 0o640, true)
		checkCopy(t, label, filepath.Join(d, "big.lz4"), src, "big", 0o640, true)
		checkCopy(t, label, filepath.Join(d, "prog"), src, "prog", 0o755, true)
		checkCopy(t, label, filepath.Join(d, "excl"), src, "small", 0o600, false)
		for _, n := range c.NodeNames() {
			// srun's steps 0 and 1 of the job; each node wrote its own copy.
			checkCopy(t, label, filepath.Join(d, "bin", fmt.Sprintf("slurm_bcast_%s.0_%s", jobs[c], n)), src, "prog", 0o755, true)
			checkCopy(t, label, filepath.Join(d, "binz", fmt.Sprintf("slurm_bcast_%s.1_%s", jobs[c], n)), src, "prog", 0o755, true)
			// The shared copies: every node served them.
			b, err := os.ReadFile(c.NodeLog(n))
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"big.plain", "big.lz4", "prog"} {
				if !strings.Contains(string(b), filepath.Join(d, name)) {
					t.Errorf("%s: node %s's log does not name %s: it did not serve it", label, n, filepath.Join(d, name))
				}
			}
		}
	}
	want := []string{"sbcast-plain 0", "sbcast-lz4 0", "sbcast-prog 0", "sbcast-excl 17 3",
		"srun-bcast 0", "srun-bcast-lz4 0", "srun-prog 0"}
	work := "<DIR>/work/" + cluster.TestUser + "/sbcast/dst"
	for i := range 4 {
		n := fmt.Sprintf("<NODE>%d", i+1)
		want = append(want,
			fmt.Sprintf("prog %d on %s as %s from %s/bin/slurm_bcast_<JOB>.0_%s", i, n, cluster.TestUser, work, n),
			fmt.Sprintf("prog %d on %s as %s from %s/binz/slurm_bcast_<JOB>.1_%s", i, n, cluster.TestUser, work, n),
			fmt.Sprintf("prog %d on %s as %s from %s/prog", i, n, cluster.TestUser, work))
	}
	// --send-libs (ldd's libc.so.6 and ld-linux-x86-64.so.2, no path excluded). srun's
	// libraries land in each node's <copy>_libs, first in the tasks' LD_LIBRARY_PATH,
	// except in 24.11, which matches a library to its executable by name while srun
	// names a directory: no node finds it ("Unspecified error", SLURM_ERROR; 26.05
	// expands the name first). sbcast's dst/printenv is one path for the four nodes of
	// this host (sbcast takes no directory, so no per-node name): without --force one
	// node creates it and three answer EEXIST, and no library is sent. (With --force,
	// 24.11 on deletes and remakes the _libs directory on each node, which on one
	// shared directory races between the nodes, on stock as on slurmd-go: the unit test
	// TestServe_SendLibsDirExists shows the replacement.)
	libPaths := func() {
		want = append(want, "srun-libs 0")
		for i := range 4 {
			want = append(want, fmt.Sprintf("%s/libs/slurm_bcast_<JOB>.3_<NODE>%d_libs", work, i+1))
		}
	}
	want = append(want, "sbcast-libs 17 3")
	files := 4 // the per-node executables
	switch p.ref.Release {
	case "24.11":
		want = append(want, "srun-libs 1",
			"srun: error: Broadcast of '/lib/x86_64-linux-gnu/libc.so.6' failed",
			"srun: fatal: Failed to broadcast '<DIR>/work/"+cluster.TestUser+"/sbcast/src/printenv'. Step launch aborted.")
		for i := range 4 {
			want = append(want, fmt.Sprintf("srun: error: REQUEST_FILE_BCAST(<NODE>%d): Unspecified error", i+1))
		}
	default:
		libPaths()
		files += 4 * 2
	}
	wantJobLines(t, p, lines[p.ref], lines[p.sut], want)
	// What --send-libs left: every file under dst/libs and dst/printenv_libs with its
	// permission bits, owner, size and digest, the same on both clusters.
	trees := map[*cluster.Cluster][]string{}
	for _, c := range p.both() {
		norm := normalizer(c, map[string]string{jobs[c]: "<JOB>"})
		for _, sub := range []string{"libs", "printenv_libs"} {
			root := filepath.Join(dirs[c], "dst", sub)
			err := filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				var st syscall.Stat_t
				if err := syscall.Stat(path, &st); err != nil {
					return err
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(dirs[c], path)
				trees[c] = append(trees[c], fmt.Sprintf("%s %o %d:%d %d %x", norm(rel), st.Mode&0o7777, st.Uid, st.Gid, st.Size, sha256.Sum256(b)))
				return nil
			})
			if err != nil {
				t.Errorf("%s: %v", p.label(c), err)
			}
		}
		slices.Sort(trees[c])
	}
	if !slices.Equal(trees[p.ref], trees[p.sut]) {
		t.Errorf("--send-libs copies differ:\nreference:\n  %s\nunder test:\n  %s", strings.Join(trees[p.ref], "\n  "), strings.Join(trees[p.sut], "\n  "))
	}
	if n := len(trees[p.ref]); n != files {
		t.Errorf("%s: %d files from --send-libs, want %d:\n  %s", p.label(p.ref), n, files, strings.Join(trees[p.ref], "\n  "))
	}
}

// sbcastAnswer is a node's reply to one raw REQUEST_FILE_BCAST.
func sbcastAnswer(t *testing.T, rp rawPeer, v uint16, m *slurmproto.FileBcast) uint32 {
	t.Helper()
	body, err := slurmproto.EncodeBody(v, m)
	if err != nil {
		t.Fatal(err)
	}
	r := rp.send(t, rp.frame(t, v, slurmproto.RequestFileBcast, body, nil))
	if r == nil {
		t.Fatal("no reply: the daemon closed the connection")
	}
	b, err := slurmproto.DecodeBody(r.Header.Version, r.Header.MsgType, r.Body)
	if err != nil {
		t.Fatal(err)
	}
	rc, ok := b.(*slurmproto.ReturnCode)
	if !ok {
		t.Fatalf("reply %s, want RESPONSE_SLURM_RC", r.Header.MsgType)
	}
	return rc.RC
}

// rootSbcastCred is an sbcast credential for root's job on node, signed as
// slurmctld signs it (munge as root, or a token of the cluster's key); mod, if set,
// changes the token signer's config (another key, another clock).
func rootSbcastCred(t *testing.T, c *cluster.Cluster, rp rawPeer, job uint32, node string, expires time.Time, mod func(cfg *authslurm.Config)) *slurmproto.SbcastCred {
	t.Helper()
	v := c.ProtocolVersion
	sc := &slurmproto.SbcastCred{
		StepID:   slurmproto.StepID{JobID: job, StepID: slurmproto.NoVal, StepHetComp: slurmproto.NoVal},
		Identity: slurmproto.Identity{UID: 0, GID: 0, PwName: "root", Gids: []uint32{0}},
		CTime:    time.Now().Truncate(time.Second), Expiration: expires.Truncate(time.Second), Nodes: node,
	}
	if rp.tok != nil {
		signer := rp.tok
		if mod != nil {
			signer = tokenSigner(t, c, mod)
		}
		tok, err := signer.MintSbcast(authslurm.SbcastGrant{Nodes: node, JobID: job, HetJobID: slurmproto.NoVal, StepID: slurmproto.NoVal}, 0, 0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return &slurmproto.SbcastCred{Token: tok}
	}
	fields, err := sc.PackFields(v)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := rp.m.Encode(context.Background(), fields, auth.UIDAny)
	if err != nil {
		t.Fatal(err)
	}
	sc.Signed, sc.Signature = fields, append([]byte(sig), 0)
	return sc
}

// testSbcastBadCredentials sends root's blocks with credentials it signs itself (as
// slurmctld, SlurmUser root) straight to node 1 of each cluster: a sound one is served,
// spoiled ones get stock's codes (22.05: ESLURMD_INVALID_JOB_CREDENTIAL; 24.11 on a
// first block whose signature or expiry fails is malformed:
// ESLURM_PROTOCOL_INCOMPLETE_PACKET), and the daemon keeps serving.
func testSbcastBadCredentials(t *testing.T, p pair) {
	badSig := uint32(slurmproto.ESlurmdInvalidJobCredential)
	if factsOf(t, p.ref).credCheckedAtUnpack {
		badSig = slurmproto.ESlurmProtocolIncompletePacket
	}
	const job = 990333
	type tc struct {
		name string
		want uint32
		msg  func(c *cluster.Cluster, rp rawPeer, dir string) *slurmproto.FileBcast
	}
	block := func(c *cluster.Cluster, dir, name string, cred *slurmproto.SbcastCred) *slurmproto.FileBcast {
		data := []byte("raw sbcast block\n")
		return &slurmproto.FileBcast{BlockNo: 1, Flags: slurmproto.FileBcastLastBlock | slurmproto.FileBcastForce, Modes: 0o100644,
			FName: filepath.Join(dir, name), UncompLen: uint32(len(data)), FileSize: uint64(len(data)), Block: data, Cred: cred}
	}
	sound := map[*cluster.Cluster]*slurmproto.SbcastCred{}
	hour := time.Now().Add(time.Hour)
	cases := []tc{
		{"sound credential", 0, func(c *cluster.Cluster, rp rawPeer, dir string) *slurmproto.FileBcast {
			sound[c] = rootSbcastCred(t, c, rp, job, node(c, 0), hour, nil)
			return block(c, dir, "sound", sound[c])
		}},
		{"the sound credential again, another file", 0, func(c *cluster.Cluster, rp rawPeer, dir string) *slurmproto.FileBcast {
			// Debian's MULTIPLE_SLURMD build takes munge's "replayed" as expected.
			return block(c, dir, "again", sound[c])
		}},
		{"a later block of a transfer never opened", slurmproto.SlurmError, func(c *cluster.Cluster, rp rawPeer, dir string) *slurmproto.FileBcast {
			m := block(c, dir, "never-opened", sound[c])
			m.BlockNo, m.BlockOffset = 2, 4096
			return m
		}},
		{"signed over other bytes", badSig, func(c *cluster.Cluster, rp rawPeer, dir string) *slurmproto.FileBcast {
			if rp.tok != nil { // a token of another key
				keys, err := authslurm.NewKeySet(false, authslurm.Key{Secret: []byte("not this cluster's key")})
				if err != nil {
					t.Fatal(err)
				}
				return block(c, dir, "forged", rootSbcastCred(t, c, rp, job, node(c, 0), hour, func(cfg *authslurm.Config) { cfg.Keys = keys }))
			}
			cr := rootSbcastCred(t, c, rp, job, node(c, 0), hour, nil)
			cr.Signed = append([]byte(nil), cr.Signed...)
			cr.Signed[len(cr.Signed)-2] ^= 1 // the node name's last letter
			return block(c, dir, "forged", cr)
		}},
		{"expired: replayed after its job ended", badSig, func(c *cluster.Cluster, rp rawPeer, dir string) *slurmproto.FileBcast {
			past := time.Now().Add(-2 * time.Hour)
			return block(c, dir, "expired", rootSbcastCred(t, c, rp, job, node(c, 0), past, func(cfg *authslurm.Config) {
				cfg.Now = func() time.Time { return past }
			}))
		}},
		{"this node not in the credential", slurmproto.ESlurmdInvalidJobCredential, func(c *cluster.Cluster, rp rawPeer, dir string) *slurmproto.FileBcast {
			return block(c, dir, "elsewhere", rootSbcastCred(t, c, rp, job, node(c, 1), hour, nil))
		}},
	}
	peers := map[*cluster.Cluster]rawPeer{}
	dirs := map[*cluster.Cluster]string{}
	for _, c := range p.both() {
		peers[c] = newRawPeer(t, c)
		dirs[c] = c.WorkDir(t, "root", "sbcast-raw")
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			got := map[*cluster.Cluster]uint32{}
			for _, c := range p.both() {
				got[c] = sbcastAnswer(t, peers[c], c.ProtocolVersion, k.msg(c, peers[c], dirs[c]))
			}
			for _, c := range p.both() {
				if got[c] != k.want {
					t.Errorf("%s: %s (%d), want %s (%d)", p.label(c), slurmproto.RCName(got[c]), got[c], slurmproto.RCName(k.want), k.want)
				}
			}
		})
	}
	t.Run("files and still serving", func(t *testing.T) {
		for _, c := range p.both() {
			var made []string
			es, _ := os.ReadDir(dirs[c])
			for _, e := range es {
				made = append(made, e.Name())
			}
			if want := []string{"again", "sound"}; !slices.Equal(made, want) {
				t.Errorf("%s: files %v, want %v", p.label(c), made, want)
			}
			rp := peers[c]
			wantPing(t, rp.send(t, rp.frame(t, c.ProtocolVersion, slurmproto.RequestPing, nil, nil)), c.ProtocolVersion)
			if !c.NodeRunning(node(c, 0)) {
				t.Errorf("%s: node daemon died", p.label(c))
			}
		}
	})
}
