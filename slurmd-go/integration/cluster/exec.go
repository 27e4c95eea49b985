package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// execSpec is one process of a cluster: where (the release's root, the cluster's
// mount namespace), in which directory, as whom, what.
type execSpec struct {
	root     string // chroot directory; "" runs on the host
	nsPid    int    // pid whose mount namespace the process joins; 0: the test's own
	netns    string // network namespace file (/run/netns/NAME) the process joins; "": the test's own
	dir      string // working directory, as seen inside root ("" is "/")
	uid, gid string // both set: the process runs as this user (setpriv, groups from root's /etc/group)
	argv     []string
	ctx      context.Context // nil: not bound to a context
}

// wrapCommand builds the host command for s. On the host it is argv itself (behind
// setpriv for an ordinary user). Inside a root it is
//
//	[nsenter --mount=/proc/<ns>/ns/mnt --] chroot <root> env --chdir=<dir> -- [setpriv ... --] argv
//
// where every program after chroot is the root's own. A node daemon of a zoned
// cluster (Options.Zones, host only) is `nsenter --net=/run/netns/<ns> -- argv`.
// Each of them execs the next,
// so the pid of the command is the pid of argv[0] once it runs: the harness signals
// and reaps the daemon itself. The namespace comes first: setns(CLONE_NEWNS) resets
// the root directory, and chroot(1) would lose the working directory (it changes to
// "/"), hence env --chdir.
func wrapCommand(s execSpec) (*exec.Cmd, error) {
	if len(s.argv) == 0 {
		return nil, errors.New("cluster: no command")
	}
	dir := s.dir
	if dir == "" {
		dir = "/"
	}
	bin, err := lookPathIn(s.root, s.argv[0])
	if err != nil {
		return nil, fmt.Errorf("cluster: %s not found: %w", s.argv[0], err)
	}
	argv := append([]string{bin}, s.argv[1:]...)
	if s.uid != "" {
		setpriv, err := lookPathIn(s.root, "setpriv")
		if err != nil {
			return nil, err
		}
		argv = append([]string{setpriv, "--reuid=" + s.uid, "--regid=" + s.gid, "--init-groups", "--"}, argv...)
	}
	hostDir := dir
	if s.root != "" {
		env, err := lookPathIn(s.root, "env")
		if err != nil {
			return nil, err
		}
		chroot, err := exec.LookPath("chroot")
		if err != nil {
			return nil, fmt.Errorf("cluster: chroot(1) not on the host: %w", err)
		}
		argv = append([]string{chroot, s.root, env, "--chdir=" + dir, "--"}, argv...)
		hostDir = "/"
	}
	var nsFlags []string
	if s.nsPid != 0 {
		nsFlags = append(nsFlags, fmt.Sprintf("--mount=/proc/%d/ns/mnt", s.nsPid))
	}
	if s.netns != "" {
		// setns(CLONE_NEWNET) leaves the mount namespace and root alone.
		nsFlags = append(nsFlags, "--net="+s.netns)
	}
	if len(nsFlags) > 0 {
		// Without --fork (and no pid namespace) nsenter execs argv: same pid.
		nsenter, err := exec.LookPath("nsenter")
		if err != nil {
			return nil, fmt.Errorf("cluster: nsenter(1) not on the host: %w", err)
		}
		argv = append(append(append([]string{nsenter}, nsFlags...), "--"), argv...)
	}
	var cmd *exec.Cmd
	if s.ctx != nil {
		cmd = exec.CommandContext(s.ctx, argv[0], argv[1:]...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Dir = hostDir
	return cmd, nil
}

// spec is an execSpec in this cluster's root and mount namespace.
func (c *Cluster) spec(dir string, argv ...string) execSpec {
	s := execSpec{root: c.Root, dir: dir, argv: argv}
	if c.ns != nil {
		s.nsPid = c.ns.pid()
	}
	return s
}

// Command is a command that runs argv (argv[0] a path inside the cluster's root or a
// name looked up in CleanPath there) where this cluster's Slurm processes run: inside
// the release's chroot and the cluster's mount namespace, in dir, as user ("" or
// "root": root). It has no environment set (nil: the test binary's). For a process a
// test manages itself, such as a second node daemon. Any goroutine.
func (c *Cluster) Command(user, dir string, argv ...string) (*exec.Cmd, error) {
	s := c.spec(dir, argv...)
	if user != "" && user != "root" {
		uid, gid, err := c.userIDs(user)
		if err != nil {
			return nil, err
		}
		s.uid, s.gid = uid, gid
	}
	return wrapCommand(s)
}

// userIDs returns the uid and gid of an ordinary user, creating TestUser on the host
// if missing, and makes sure the user exists with the same ids and home inside the
// cluster's root.
func (c *Cluster) userIDs(name string) (uid, gid string, err error) {
	uid, gid, err = lookupUser(name)
	if err != nil {
		return uid, gid, err
	}
	// The node's root too: its jobs run as the user there.
	for _, r := range []string{c.Root, c.NodeRoot} {
		if r == "" {
			continue
		}
		if err := ensureUserIn(r, name); err != nil {
			return uid, gid, err
		}
	}
	return uid, gid, nil
}

var (
	rootUsersMu sync.Mutex
	rootUsers   = map[string]bool{} // root + "\x00" + user -> present; guarded by rootUsersMu
)

// passwdEntry is one /etc/passwd line.
type passwdEntry struct{ name, uid, gid, home, shell string }

// readPasswd returns the entry of name in the passwd file at path (ok false if none).
func readPasswd(path, name string) (e passwdEntry, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return e, false, fmt.Errorf("cluster: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ":")
		if len(p) == 7 && p[0] == name {
			return passwdEntry{name: p[0], uid: p[2], gid: p[3], home: p[5], shell: p[6]}, true, nil
		}
	}
	return e, false, sc.Err()
}

// hasGroupID reports whether the group file at path has a group with gid.
func hasGroupID(path, gid string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("cluster: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p := strings.Split(line, ":"); len(p) >= 3 && p[2] == gid {
			return true, nil
		}
	}
	return false, nil
}

// ensureUserIn makes the host user name exist inside root with the same uid, gid,
// home and shell (groupadd/useradd of the root, which lock its files against other
// test binaries doing the same). A user of that name with other ids is an error.
func ensureUserIn(root, name string) error {
	key := root + "\x00" + name
	rootUsersMu.Lock()
	defer rootUsersMu.Unlock()
	if rootUsers[key] {
		return nil
	}
	host, ok, err := readPasswd("/etc/passwd", name)
	if err != nil || !ok {
		return fmt.Errorf("cluster: user %s not in the host's /etc/passwd: %v", name, err)
	}
	check := func() (bool, error) {
		in, ok, err := readPasswd(filepath.Join(root, "etc/passwd"), name)
		if err != nil || !ok {
			return false, err
		}
		if in.uid != host.uid || in.gid != host.gid || in.home != host.home {
			return false, fmt.Errorf("cluster: user %s in %s has uid %s gid %s home %s, the host's has %s %s %s",
				name, root, in.uid, in.gid, in.home, host.uid, host.gid, host.home)
		}
		return true, nil
	}
	if ok, err := check(); err != nil || ok {
		rootUsers[key] = ok
		return err
	}
	run := func(argv ...string) error {
		cmd, err := wrapCommand(execSpec{root: root, argv: argv})
		if err != nil {
			return err
		}
		out, err := runBounded(cmd, clientCmdTimeout)
		// 9: the name exists (another test binary won the race); check() decides.
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 9) {
			return fmt.Errorf("cluster: %q in %s: %w: %s", argv, root, err, out)
		}
		return nil
	}
	hasGroup, err := hasGroupID(filepath.Join(root, "etc/group"), host.gid)
	if err != nil {
		return err
	}
	if !hasGroup {
		if err := run("groupadd", "-g", host.gid, name); err != nil {
			return err
		}
	}
	if err := run("useradd", "-M", "-u", host.uid, "-g", host.gid, "-d", host.home, "-s", host.shell, name); err != nil {
		return err
	}
	ok, err = check()
	if err == nil && !ok {
		err = fmt.Errorf("cluster: useradd %s in %s left no such user", name, root)
	}
	rootUsers[key] = ok
	return err
}

// Mount namespace of an auth/slurm cluster.
//
// auth/slurm's daemons serve SACK (token minting for clients and slurmstepd) on fixed
// paths: slurmd on /run/slurm/sack.socket, slurmctld on /run/slurmctld/sack.socket
// (src/plugins/auth/slurm/sack.c, no setting moves them; each daemon unlinks the path
// and binds its own socket), and every client tries them in that order
// (src/common/sack_api.c). Two clusters with different keys in one root would take
// each other's paths: the last daemon started wins, and the clients and step
// managers of the other cluster get tokens its daemons reject. So each auth/slurm
// cluster gets its own mount namespace, held by a sleeping process, with a private
// tmpfs on the root's /run/slurm and /run/slurmctld, and every process of the cluster
// (daemons and clients) joins it. The node daemons of one cluster still share
// /run/slurm: the last one started owns the path, any of them mints valid tokens (one
// key), and a client falls back to slurmctld's socket while the owner is down.

// sackDirs are the directories auth/slurm's daemons put their SACK sockets in,
// inside the release's root.
var sackDirs = []string{"/run/slurm", "/run/slurmctld"}

// startMountNS starts the holder of the cluster's mount namespace and mounts a
// private tmpfs on each of sackDirs in it.
func (c *Cluster) startMountNS(t testing.TB) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("cluster: sleep(1): %v", err)
	}
	cmd := exec.Command(sleep, "infinity")
	// Go unshares in the child before exec and makes every mount private there, so
	// the namespace exists once Start has returned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	p, err := startProc(c.sp, "mount-namespace", filepath.Join(c.Dir, "mount-namespace.out"), daemonEnv(), cmd)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c.ns = p
	for _, d := range sackDirs {
		mp := filepath.Join(c.Root, d)
		if err := os.MkdirAll(mp, 0o755); err != nil {
			t.Fatalf("cluster: %v", err)
		}
		mount := exec.Command("nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", p.pid()), "--",
			"mount", "-t", "tmpfs", "-o", "mode=0755,size=1m", "tiee-"+c.Name, mp)
		if out, err := runBounded(mount, clientCmdTimeout); err != nil {
			t.Fatalf("cluster: private %s for %s: %v: %s", mp, c.Name, err, out)
		}
	}
}
