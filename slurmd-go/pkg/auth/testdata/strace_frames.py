#!/usr/bin/env python3
"""Reassemble Slurm frames from an strace -f -xx log (per pid+fd, per direction)."""
import re, sys, struct, json, collections

line_re = re.compile(r'^(\d+) (\w+)\((\d+), (.*)$')
def unx(s):
    return bytes(int(h, 16) for h in re.findall(r'\\x([0-9a-f]{2})', s))

streams = collections.defaultdict(bytearray)  # (pid, fd, dir) -> bytes
order = []
tcpfds = {}
pending = {}
def lines():
    for line in open(sys.argv[1]):
        line = line.rstrip('\n')
        m = re.match(r'^(\d+) (.*) <unfinished \.\.\.>$', line)
        if m:
            pending[m.group(1)] = m.group(2); continue
        m = re.match(r'^(\d+) <\.\.\. \w+ resumed>(.*)$', line)
        if m:
            yield m.group(1) + ' ' + pending.pop(m.group(1), '') + m.group(2); continue
        yield line
for line in lines():
    m = line_re.match(line)
    if not m: continue
    pid, call, fd, rest = m.group(1), m.group(2), int(m.group(3)), m.group(4)
    if call == 'connect':
        tcpfds[fd] = 'AF_INET' in rest
        continue
    if call in ('accept', 'accept4'):
        r = re.search(r'= (\d+)$', line.strip())
        if r: tcpfds[int(r.group(1))] = 'AF_INET' in rest
        continue
    if not tcpfds.get(fd): continue
    r = re.search(r'\) = (-?\d+)', line)
    if not r or int(r.group(1)) <= 0: continue
    n = int(r.group(1))
    if call in ('writev', 'sendmsg', 'readv', 'recvmsg'):
        data = b''.join(unx(x) for x in re.findall(r'iov_base="([^"]*)"', rest))
    else:
        q = re.match(r'"([^"]*)"', rest)
        if not q: continue
        data = unx(q.group(1))
    data = data[:n]
    d = 'out' if call in ('write', 'writev', 'sendto', 'sendmsg') else 'in'
    key = (fd, d)
    if key not in order: order.append(key)
    streams[key] += data

out = []
for key in order:
    buf = bytes(streams[key]); i = 0
    while i + 4 <= len(buf):
        (n,) = struct.unpack('>I', buf[i:i+4])
        frame = buf[i:i+4+n]
        if len(frame) < 4 + n or n < 16 or n > (1 << 20): break
        i += 4 + n
        p = 4
        ver, flags = struct.unpack('>HH', frame[p:p+4]); p += 4
        if ver < 0x2600: p += 2  # msg_index
        (mtype,) = struct.unpack('>H', frame[p:p+2]); p += 2
        (blen,) = struct.unpack('>I', frame[p:p+4]); p += 4
        (fcnt,) = struct.unpack('>H', frame[p:p+2]); p += 2
        if fcnt: raise SystemExit('forward not handled')
        (rcnt,) = struct.unpack('>H', frame[p:p+2]); p += 2
        if rcnt: raise SystemExit('ret_list not handled')
        (fam,) = struct.unpack('>H', frame[p:p+2]); p += 2
        if fam == 2: p += 6
        elif fam == 10: p += 4 + 16 + 2
        (plugin, slen) = struct.unpack('>II', frame[p:p+8]); p += 8
        cred = frame[p:p+slen]; p += slen
        body = frame[p:]
        assert len(body) == blen, (len(body), blen)
        out.append(dict(stream='fd%d/%s' % key, version=ver, msg_type=mtype, plugin=plugin,
                        cred=cred.rstrip(b'\0').decode(), frame=frame.hex(), body_len=blen))
json.dump(out, sys.stdout, indent=1)
