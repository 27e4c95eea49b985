#!/usr/bin/env python3
"""Print what a traced process received on each TCP connection to PORT.

usage: rawstreams.py PORT TRACEFILE...   (strace -ff -yy -xx output)

For replies that are not Slurm frames (26.05's HTTP answer to a 22.05
registration) goldencap writes nothing; this shows the bytes as they came,
one connection per line: the trace file, the socket, the byte count and the
bytes (Python repr).
"""
import re
import sys

LINE = re.compile(r'^(read|recvfrom|readv|recvmsg)\((\d+)<(TCP[^>]*?:\[[^\]]*\])>, (.*)\) += (\d+)')
STR = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')


def main():
    port = sys.argv[1]
    for path in sys.argv[2:]:
        streams = {}
        order = []
        for line in open(path, errors="replace"):
            m = LINE.match(line)
            if not m or not m.group(3).endswith("->127.0.0.1:%s]" % port):
                continue
            key = (m.group(2), m.group(3))
            data = b"".join(bytes.fromhex(s.replace("\\x", "")) for s in STR.findall(m.group(4)))
            data = data[:int(m.group(5))]
            if key not in streams:
                streams[key] = b""
                order.append(key)
            streams[key] += data
        for key in order:
            print("%s\t%s\t%d bytes\t%r" % (path, key[1], len(streams[key]), streams[key]))


if __name__ == "__main__":
    main()
