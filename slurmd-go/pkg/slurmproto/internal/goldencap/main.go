// Command goldencap extracts Slurm frames from `strace -ff -xx` output of
// real Slurm daemons into testdata/*.bin (one length-prefixed frame per
// file) and prints a summary of each. See testdata/README.md.
//
// usage: goldencap -out DIR TRACEFILE...
//
//	goldencap -dump FRAME.bin...    (print header, auth and body)
//	goldencap -check FRAME.bin...   (each file is exactly one frame; exit 1 if not)
//
// Each trace file is one thread (strace -ff). Per file and connection the
// sent and received bytes are concatenated and cut into frames (strace.go
// says which calls count); streams that do not parse as Slurm frames are
// ignored. Identical frames (seen by sender and receiver) are written once.
//
// Headers are read at their fixed places for every release from 20.11 to
// 26.05 (frame.go), so frames that slurmproto cannot decode yet (24.11's
// 0x2A00, 26.05's 0x2D00) are still cut and named; -dump shows their bodies
// as raw bytes. The first frame of a slurmstepd -> srun I/O stream, an
// io_init_msg, is written as IO_INIT_MSG.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/slurmproto"
)

func main() {
	out := flag.String("out", "testdata", "output directory")
	dumpMode := flag.Bool("dump", false, "print the given .bin frames")
	checkMode := flag.Bool("check", false, "check that each given file is exactly one frame")
	flag.Parse()
	switch {
	case *dumpMode:
		for _, f := range flag.Args() {
			dump(f)
		}
	case *checkMode:
		bad := 0
		for _, f := range flag.Args() {
			if err := checkFile(f); err != nil {
				fmt.Fprintln(os.Stderr, err)
				bad++
			}
		}
		fmt.Printf("%d files, %d bad\n", len(flag.Args()), bad)
		if bad > 0 {
			os.Exit(1)
		}
	default:
		if err := extract(*out, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "goldencap:", err)
			os.Exit(1)
		}
	}
}

// typeName is Slurm's name of t when slurmproto knows it, else "T<number>".
func typeName(t uint16) string {
	if mt := slurmproto.MsgType(t); mt.Known() {
		return mt.String()
	}
	return fmt.Sprintf("T%d", t)
}

// byThread orders trace files by name and then by thread id (trace-n1.9 before
// trace-n1.10): threads are made in time order, so frames are numbered in
// the order they were sent.
func byThread(traces []string) []string {
	s := append([]string(nil), traces...)
	key := func(f string) (string, int) {
		base, id, ok := strings.Cut(filepath.Base(f), ".")
		n, err := strconv.Atoi(id)
		if !ok || err != nil {
			return f, -1
		}
		return filepath.Join(filepath.Dir(f), base), n
	}
	sort.SliceStable(s, func(i, j int) bool {
		bi, ni := key(s[i])
		bj, nj := key(s[j])
		if bi != bj {
			return bi < bj
		}
		return ni < nj
	})
	return s
}

func extract(out string, traces []string) error {
	seen := map[[32]byte]string{}
	counts := map[string]int{}
	// Each frame is written once; a frame seen again (by its receiver, or an
	// identical reply on another connection) gets an index line naming the
	// first file, marked dup, so requests and replies pair up by connection.
	write := func(s *stream, what string, version uint16, fr []byte, summary string) error {
		conn := s.peer
		if conn == "" {
			conn = "-"
		}
		sum := sha256.Sum256(fr)
		name, dup := seen[sum]
		if !dup {
			who := strings.SplitN(filepath.Base(s.file), ".", 2)[0]
			who = strings.TrimPrefix(who, "trace-")
			key := fmt.Sprintf("%s-%s-%s-v%04x", who, s.dir, what, version)
			counts[key]++
			name = fmt.Sprintf("%s-%d.bin", key, counts[key])
			seen[sum] = name
			if err := os.WriteFile(filepath.Join(out, name), fr, 0o644); err != nil {
				return err
			}
		}
		mark := ""
		if dup {
			mark = fmt.Sprintf(" dup %s", s.dir)
		}
		fmt.Printf("%s\t%s fd=%d conn=%s len=%d %s%s\n", name, s.file, s.fd, conn, len(fr), summary, mark)
		return nil
	}
	for _, f := range byThread(traces) {
		streams, err := parseTrace(f)
		if err != nil {
			return err
		}
		for _, s := range streams {
			if m, ok := parseIOInit(s.data); ok {
				n := 4 + 18 + len(m.Key) + 1
				sum := fmt.Sprintf("nodeid=%d stdout_objs=%d stderr_objs=%d key=%d bytes", m.NodeID, m.StdoutObjs, m.StderrObj, len(m.Key))
				if err := write(s, "IO_INIT_MSG", m.Version, s.data[:n], sum); err != nil {
					return err
				}
				continue
			}
			for _, fr := range frames(s.data) {
				h, _ := rawParse(fr) // frames returns only frames rawParse accepts
				if err := write(s, typeName(h.MsgType), h.Version, fr, h.summary()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (h *rawHeader) summary() string {
	s := fmt.Sprintf("flags=0x%04x fwd=%d/%q", h.Flags, h.FwdCnt, h.FwdNodes)
	if h.FwdCnt > 0 && h.Version >= version2411 {
		s += fmt.Sprintf(" depth=%d", h.TreeDepth)
	}
	return s + fmt.Sprintf(" ret=%d auth=%d body=%d", h.RetCnt, h.AuthPlugin, h.BodyLength)
}

// checkFile: the file is one whole frame (length prefix = size - 4) whose
// header and auth block sit where its version puts them, or one io_init_msg.
func checkFile(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if m, ok := parseIOInit(b); ok {
		if n := 4 + 18 + len(m.Key) + 1; n != len(b) {
			return fmt.Errorf("%s: io_init_msg of %d bytes followed by %d more", file, n, len(b)-n)
		}
		return nil
	}
	if _, err := rawParse(b); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

func dump(file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Printf("== %s (%d bytes)\n", file, len(b))
	if m, ok := parseIOInit(b); ok {
		fmt.Printf("  io_init_msg: version=0x%04x nodeid=%d stdout_objs=%d stderr_objs=%d io_key=%.40s... (%d chars)\n",
			m.Version, m.NodeID, m.StdoutObjs, m.StderrObj, m.Key, len(m.Key))
		return
	}
	h, err := rawParse(b)
	if err != nil {
		fmt.Println("  not a frame:", err)
		return
	}
	fmt.Printf("  header: version=0x%04x flags=0x%04x type=%s(%d) body_length=%d\n",
		h.Version, h.Flags, typeName(h.MsgType), h.MsgType, h.BodyLength)
	if h.FwdCnt > 0 {
		fmt.Printf("  forward: cnt=%d nodes=%q timeout=%d tree_width=%d", h.FwdCnt, h.FwdNodes, h.FwdTimeout, h.TreeWidth)
		if h.NetCred != "" {
			fmt.Printf(" net_cred=%q", h.NetCred)
		}
		if h.Version >= version2411 {
			fmt.Printf(" tree_depth=%d", h.TreeDepth)
		}
		fmt.Println()
	}
	fmt.Printf("  ret_cnt=%d ret_list+orig_addr=%x\n", h.RetCnt, h.RetAndOrig)
	if h.Flags&flagNoAuthCred != 0 {
		fmt.Println("  auth: none (SLURM_NO_AUTH_CRED)")
	} else {
		fmt.Printf("  auth: plugin=%d cred=%.40s... (%d chars)\n", h.AuthPlugin, h.AuthCred, len(h.AuthCred))
	}
	if !slurmproto.ValidVersion(h.Version) {
		fmt.Printf("  body: %x\n", h.Body)
		return
	}
	m, err := slurmproto.DecodeMessage(b[4:])
	if err != nil {
		fmt.Printf("  slurmproto: %v\n  body: %x\n", err, h.Body)
		return
	}
	for i, e := range m.Header.RetList {
		fmt.Printf("  ret[%d]: err=%d type=%v node=%q body=%x\n", i, e.Err, e.MsgType, e.NodeName, e.Body)
		if body, err := slurmproto.DecodeBody(h.Version, e.MsgType, e.Body); err == nil {
			fmt.Printf("          %+v\n", body)
		}
	}
	fmt.Printf("  orig: %v\n", m.Header.OrigAddr)
	body, err := slurmproto.DecodeBody(h.Version, m.Header.MsgType, m.Body)
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
