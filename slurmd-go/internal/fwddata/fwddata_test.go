package fwddata

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmconf"
	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

// listen serves one connection on a unix socket in a fresh directory and
// returns what it read.
func listen(t *testing.T, dir string) (string, <-chan []byte) {
	t.Helper()
	path := filepath.Join(dir, "sock.pmi2.7.0")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	return path, got
}

func TestServe_WritesUIDLenData(t *testing.T) {
	dir := t.TempDir()
	path, got := listen(t, dir)
	n := Node{NodeName: func() string { return "n1" }, Log: hclog.NewNullLogger()}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	// %n is the receiving node's name, as the pmi2 tree address carries it.
	addr := strings.Replace(path, "sock.pmi2", "%n-sock.pmi2", 1)
	if err := os.Rename(path, strings.Replace(addr, "%n", "n1", 1)); err != nil {
		t.Fatal(err)
	}
	rc := n.Serve(uid, gid, &slurmproto.ForwardData{Address: addr, Len: 3, Data: []byte("abcdef")})
	if rc != 0 {
		t.Fatalf("rc %d", rc)
	}
	b := <-got
	want := binary.BigEndian.AppendUint32(nil, uid)
	want = binary.BigEndian.AppendUint32(want, 3)
	want = append(want, "abc"...)
	if string(b) != string(want) {
		t.Fatalf("socket read %x, want %x", b, want)
	}
}

func TestServe_BadInput(t *testing.T) {
	dir := t.TempDir()
	n := Node{NodeName: func() string { return "n1" }, Log: hclog.NewNullLogger()}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if rc := n.Serve(uid, gid, &slurmproto.ForwardData{Address: filepath.Join(dir, "none"), Len: 1, Data: []byte{1}}); rc != uint32(syscall.ENOENT) {
		t.Errorf("missing socket: rc %d, want ENOENT", rc)
	}
	path, _ := listen(t, dir)
	if rc := n.Serve(uid, gid, &slurmproto.ForwardData{Address: path, Len: 9, Data: []byte{1}}); rc != uint32(syscall.EINVAL) {
		t.Errorf("len over data: rc %d, want EINVAL", rc)
	}
	if rc := n.Serve(uid, gid, &slurmproto.ForwardData{Address: "/" + strings.Repeat("x", 120), Len: 0}); rc != uint32(syscall.EINVAL) {
		t.Errorf("long path: rc %d, want EINVAL", rc)
	}
}

// TestServe_AsUser: the socket is connected with the sender's identity, so
// a socket only root may write is refused to an ordinary user.
func TestServe_AsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("changing the file system identity needs root: run as root (make test and CI do)")
	}
	dir := t.TempDir()
	path, _ := listen(t, dir)
	if err := os.Chmod(path, 0o700); err != nil {
		t.Fatal(err)
	}
	n := Node{NodeName: func() string { return "n1" }, Log: hclog.NewNullLogger()}
	if rc := n.Serve(65534, 65534, &slurmproto.ForwardData{Address: path, Len: 1, Data: []byte{1}}); rc != uint32(syscall.EACCES) {
		t.Fatalf("rc %d, want EACCES", rc)
	}
}

type fakeCaller map[string]slurmproto.Body

func (f fakeCaller) CallAddr(ctx context.Context, host string, body slurmproto.Body, restrictUID uint32) (slurmproto.Body, error) {
	if _, ok := body.(*slurmproto.ForwardData); !ok {
		return nil, errors.New("not forward data")
	}
	r, ok := f[host]
	if !ok {
		return nil, errors.New("connection refused")
	}
	return r, nil
}

func TestSend_NamesFailedNodes(t *testing.T) {
	resolve := func(n string) (string, bool) {
		if n == "ghost" {
			return "", false
		}
		return n + ":1", true
	}
	c := fakeCaller{"a:1": &slurmproto.ReturnCode{}, "b:1": &slurmproto.ReturnCode{RC: uint32(syscall.ENOENT)}}
	err := Send(context.Background(), c, resolve, []string{"a", "b", "c", "ghost"}, "/x", []byte{1})
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("err %v", err)
	}
	if strings.Join(fe.Nodes, ",") != "b,c,ghost" {
		t.Fatalf("failed nodes %v", fe.Nodes)
	}
	var rce *RCError
	if !errors.As(fe.Errs["b"], &rce) || rce.RC != uint32(syscall.ENOENT) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("b: %v", fe.Errs["b"])
	}
	if err := Send(context.Background(), c, resolve, []string{"a"}, "/x", nil); err != nil {
		t.Fatal(err)
	}
}

func TestNewResolver(t *testing.T) {
	p := filepath.Join(t.TempDir(), "slurm.conf")
	conf := "ClusterName=c\nSlurmctldHost=localhost(127.0.0.1)\nSlurmdPort=7000\n" +
		"NodeName=t1 NodeAddr=127.0.0.1 Port=28001\nNodeName=t2 NodeHostname=localhost  # NodeAddr defaults to NodeHostname\n" +
		"PartitionName=p Nodes=ALL\n"
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := slurmconf.Load(p, slurmconf.Options{Version: slurmconf.Lenient})
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver(c)
	for n, want := range map[string]string{"t1": "127.0.0.1:28001", "t2": "localhost:7000"} {
		if got, ok := r(n); !ok || got != want {
			t.Errorf("%s: %q %v, want %q", n, got, ok, want)
		}
	}
	if _, ok := r("t3"); ok {
		t.Error("t3 resolved")
	}
}
