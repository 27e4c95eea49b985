package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// A trace line is `call(fd[<what>], ...) = ret`. With strace -yy the fd
// carries what it is: `5<TCP:[127.0.0.1:6818->127.0.0.1:40312]>`, a file
// `3</etc/passwd>`, `4<UNIX-STREAM:[...]>`. The non-greedy match stops at the
// first ">, " because "->" inside a socket's addresses is never followed by
// a comma.
var (
	lineRE   = regexp.MustCompile(`^([a-z0-9]+)\((\d+)(?:<(.*?)>)?(?:, (.*))?\) += (-?\d+)`)
	stringRE = regexp.MustCompile(`"((?:\\x[0-9a-f]{2})*)"`)
	iovRE    = regexp.MustCompile(`iov_base="((?:\\x[0-9a-f]{2})*)"`)
)

// dataCalls are the calls whose buffer is socket data, with the direction.
var dataCalls = map[string]string{
	"sendto": "send", "write": "send", "writev": "send", "sendmsg": "send",
	"recvfrom": "recv", "read": "recv", "readv": "recv", "recvmsg": "recv",
}

// stream is the bytes one thread sent (or received) on one connection, in
// order.
type stream struct {
	file, dir string
	fd        int
	peer      string // the -yy socket description, "" without -yy
	data      []byte
}

// parseTrace reads one strace -ff file (one thread) into its streams.
//
// Without -yy (the 22.05 captures) only sendto/recvfrom count: 22.05 does
// all socket I/O with send/recv and read/write only on files and pipes.
// With -yy every data call on a TCP socket counts (24.11 sends with writev,
// and its conmgr reads with read). A connect, accept or close of an fd ends
// its streams: conmgr threads serve many connections and reuse fd numbers.
func parseTrace(file string) ([]*stream, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	cur := map[string]*stream{}
	end := func(fd int) {
		delete(cur, fmt.Sprint("send", fd))
		delete(cur, fmt.Sprint("recv", fd))
	}
	var all []*stream
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		call, what, args := m[1], m[3], m[4]
		fd, _ := strconv.Atoi(m[2])
		ret, _ := strconv.Atoi(m[5])
		switch call {
		case "connect", "close":
			end(fd)
			continue
		case "accept", "accept4":
			if ret >= 0 {
				end(ret)
			}
			continue
		}
		dir, ok := dataCalls[call]
		if !ok || ret <= 0 || strings.Contains(args, "MSG_PEEK") {
			continue
		}
		if what == "" && call != "sendto" && call != "recvfrom" {
			continue
		}
		if what != "" && !strings.HasPrefix(what, "TCP") {
			continue
		}
		var data []byte
		if strings.HasSuffix(call, "v") || strings.HasSuffix(call, "msg") {
			for _, s := range iovRE.FindAllStringSubmatch(args, -1) {
				data = append(data, unhex(s[1])...)
			}
		} else if s := stringRE.FindStringSubmatch(args); s != nil {
			data = unhex(s[1])
		}
		if ret < len(data) {
			data = data[:ret] // a short write: strace shows the whole buffer
		}
		k := fmt.Sprint(dir, fd)
		s := cur[k]
		if s == nil || s.peer != what {
			s = &stream{file: file, dir: dir, fd: fd, peer: what}
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
