// Command goldencap extracts Slurm frames from `strace -ff -xx` output of
// real Slurm daemons into testdata/*.bin (one length-prefixed frame per
// file) and prints a summary of each. See testdata/README.md.
//
// usage: goldencap -out DIR TRACEFILE...
//
//	goldencap -dump FRAME.bin...   (print decoded header, auth and body)
//
// Each trace file is one thread (strace -ff). Only sendto/recvfrom calls
// with string data are used: Slurm's socket I/O goes through send/recv,
// while munge, config and /proc traffic use read/write. Per file and fd the
// sent and received bytes are concatenated (a connect on the fd starts a new
// stream) and cut into frames; streams that do not parse as Slurm frames
// are ignored. Identical frames (seen by sender and receiver) are written
// once.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

var (
	callRE    = regexp.MustCompile(`^(sendto|recvfrom)\((\d+), "((?:\\x[0-9a-f]{2})*)"(?:\.\.\.)?, .*\) += (\d+)$`)
	connectRE = regexp.MustCompile(`^connect\((\d+),`)
)

type stream struct {
	file, dir string
	fd        int
	data      []byte
}

func main() {
	out := flag.String("out", "testdata", "output directory")
	dumpMode := flag.Bool("dump", false, "decode and print the given .bin frames")
	flag.Parse()
	if *dumpMode {
		for _, f := range flag.Args() {
			dump(f)
		}
		return
	}
	seen := map[[32]byte]bool{}
	counts := map[string]int{}
	for _, f := range flag.Args() {
		streams, err := parse(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, s := range streams {
			for _, fr := range frames(s.data) {
				sum := sha256.Sum256(fr)
				if seen[sum] {
					continue
				}
				seen[sum] = true
				m, err := slurmproto.DecodeMessage(fr[4:])
				if err != nil {
					continue
				}
				who := strings.SplitN(filepath.Base(s.file), ".", 2)[0]
				who = strings.TrimPrefix(who, "trace-")
				key := fmt.Sprintf("%s-%s-%s-v%04x", who, s.dir, m.Header.MsgType, m.Header.Version)
				counts[key]++
				name := fmt.Sprintf("%s-%d.bin", key, counts[key])
				if err := os.WriteFile(filepath.Join(*out, name), fr, 0o644); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				fmt.Printf("%s\t%s fd=%d len=%d fwd=%d/%q ret=%d orig=%s body=%d\n", name, s.file, s.fd,
					len(fr), m.Header.Forward.Count, m.Header.Forward.Nodes, len(m.Header.RetList),
					m.Header.OrigAddr, len(m.Body))
			}
		}
	}
}

// frames cuts a byte stream into length-prefixed frames, stopping at the
// first length that does not fit.
func frames(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		if n < 16 || int64(n)+4 > int64(len(b)) {
			break
		}
		v := binary.BigEndian.Uint16(b[4:])
		if !slurmproto.ValidVersion(v) {
			break
		}
		out = append(out, b[:4+n])
		b = b[4+n:]
	}
	return out
}

func parse(file string) ([]*stream, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	cur := map[string]*stream{}
	var all []*stream
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := connectRE.FindStringSubmatch(line); m != nil {
			fd, _ := strconv.Atoi(m[1])
			delete(cur, fmt.Sprint("sendto", fd))
			delete(cur, fmt.Sprint("recvfrom", fd))
			continue
		}
		m := callRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fd, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[4])
		data := unhex(m[3])
		if n < len(data) {
			data = data[:n]
		}
		k := fmt.Sprint(m[1], fd)
		s := cur[k]
		if s == nil {
			dir := "send"
			if m[1] == "recvfrom" {
				dir = "recv"
			}
			s = &stream{file: file, dir: dir, fd: fd}
			cur[k] = s
			all = append(all, s)
		}
		s.data = append(s.data, data...)
	}
	return all, sc.Err()
}

func unhex(s string) []byte {
	b := make([]byte, 0, len(s)/4)
	for i := 0; i+4 <= len(s); i += 4 {
		v, _ := strconv.ParseUint(s[i+2:i+4], 16, 8)
		b = append(b, byte(v))
	}
	return b
}

func dump(file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Printf("== %s (%d bytes)\n", file, len(b))
	m, err := slurmproto.DecodeMessage(b[4:])
	if err != nil {
		fmt.Println("  decode:", err)
		return
	}
	h := m.Header
	fmt.Printf("  header: version=0x%04x flags=%d msg_index=%d type=%v(%d) body_length=%d forward=%+v orig=%v\n",
		h.Version, h.Flags, h.MsgIndex, h.MsgType, uint16(h.MsgType), h.BodyLength, h.Forward, h.OrigAddr)
	for i, e := range h.RetList {
		fmt.Printf("  ret[%d]: err=%d type=%v node=%q body=%x\n", i, e.Err, e.MsgType, e.NodeName, e.Body)
		if body, err := slurmproto.DecodeBody(h.Version, e.MsgType, e.Body); err == nil {
			fmt.Printf("          %+v\n", body)
		}
	}
	fmt.Printf("  auth: plugin=%d cred=%.40s... (%d chars)\n", m.Auth.PluginID, m.Auth.Cred, len(m.Auth.Cred))
	body, err := slurmproto.DecodeBody(h.Version, h.MsgType, m.Body)
	if err != nil {
		fmt.Printf("  body: %x (%v)\n", m.Body, err)
		return
	}
	fmt.Printf("  body: %+v\n", body)
	var cred *slurmproto.Cred
	switch b := body.(type) {
	case *slurmproto.BatchJobLaunch:
		cred = b.Cred
	case *slurmproto.KillJob:
		cred = b.Cred
	case *slurmproto.LaunchProlog:
		cred = b.Cred
	}
	if cred != nil {
		fmt.Printf("  cred: %+v\n", *cred)
	}
}
