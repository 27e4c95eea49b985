#!/usr/bin/env python3
"""pcap_frames.py CAPTURE.pcap [LABEL]: the Slurm RPC frames of a tcpdump capture
(tcpdump -i lo -w X.pcap -s 0), one JSON object per frame that carries an auth/slurm
token, on stdout as a JSON list.

Reassembles every TCP stream per direction (in capture order, dropping retransmitted
bytes), splits it into `u32 length` frames and reads the >= 0x2700 header: version,
flags, msg_type, body_length, forward (cnt [+ nodelist, timeout, tree_width,
net_cred when flags & 0x80, tree_depth]), ret_cnt, orig_addr; then, unless flags &
0x40 (SLURM_NO_AUTH_CRED), the auth block `u32 plugin_id` + `packstr(token)`.
Written for this repository's testdata; no Slurm code in it."""
import json, struct, sys

def packets(path):
    with open(path, 'rb') as f:
        data = f.read()
    magic = struct.unpack('<I', data[:4])[0]
    end = '<' if magic in (0xa1b2c3d4, 0xa1b23c4d) else '>'
    linktype = struct.unpack(end + 'I', data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack(end + 'IIII', data[off:off + 16])
        off += 16
        pkt = data[off:off + caplen]
        off += caplen
        if linktype == 1:      # Ethernet (tcpdump -i lo)
            if struct.unpack('>H', pkt[12:14])[0] != 0x0800:
                continue
            pkt = pkt[14:]
        elif linktype == 113:  # Linux cooked
            pkt = pkt[16:]
        ihl = (pkt[0] & 15) * 4
        if pkt[9] != 6:
            continue
        src, dst = pkt[12:16], pkt[16:20]
        tcp = pkt[ihl:]
        sport, dport, seq = struct.unpack('>HHI', tcp[:8])
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        yield (src, sport, dst, dport), seq, flags, tcp[doff:]

def streams(path):
    out = {}
    for key, seq, flags, payload in packets(path):
        s = out.setdefault(key, {'next': None, 'data': bytearray(), 'first': len(out)})
        if flags & 0x02:  # SYN
            s['next'] = (seq + 1) & 0xffffffff
            continue
        if not payload or s['next'] is None:
            continue
        rel = (seq - s['next']) & 0xffffffff
        if rel >= 0x80000000:  # retransmission of bytes we have
            skip = (s['next'] - seq) & 0xffffffff
            payload = payload[skip:] if skip < len(payload) else b''
            rel = 0
        if rel != 0:
            continue  # out of order: loopback does not reorder
        s['data'] += payload
        s['next'] = (s['next'] + len(payload)) & 0xffffffff
    return sorted(out.items(), key=lambda kv: kv[1]['first'])

class R:
    def __init__(self, b): self.b, self.o = b, 0
    def u16(self): v = struct.unpack('>H', self.b[self.o:self.o + 2])[0]; self.o += 2; return v
    def u32(self): v = struct.unpack('>I', self.b[self.o:self.o + 4])[0]; self.o += 4; return v
    def s(self):
        n = self.u32()
        v = self.b[self.o:self.o + n]; self.o += n
        return v
    def addr(self):
        fam = self.u16()
        if fam == 2: self.o += 6
        elif fam == 10: self.o += 18

def frame(b):
    r = R(b)
    h = {'version': r.u16(), 'flags': r.u16(), 'msg_type': r.u16(), 'body_len': r.u32()}
    fwd = r.u16()
    h['forward_cnt'] = fwd
    if fwd:
        r.s(); r.u32(); r.u16()
        if h['flags'] & 0x80: r.s()
        r.u16()
    if r.u16():
        return h, None, None  # ret_list: not parsed
    r.addr()
    token = None
    if not h['flags'] & 0x40:
        h['plugin_id'] = r.u32()
        token = r.s()
    body = b[r.o:]
    return h, token, body

def main():
    label = sys.argv[2] if len(sys.argv) > 2 else ''
    res = []
    for (src, sport, dst, dport), s in streams(sys.argv[1]):
        d = bytes(s['data'])
        o = 0
        while o + 4 <= len(d):
            n = struct.unpack('>I', d[o:o + 4])[0]
            if n > 1 << 24 or o + 4 + n > len(d):
                break
            f = d[o:o + 4 + n]
            o += 4 + n
            try:
                h, token, body = frame(f[4:])
            except Exception:
                continue
            if not token or h.get('plugin_id') != 103:
                continue
            ent = dict(h)
            ent['ports'] = '%d->%d' % (sport, dport)
            ent['label'] = label
            ent['token'] = token.rstrip(b'\0').decode()
            ent['body_ok'] = body is not None and len(body) == h['body_len']
            ent['frame'] = f.hex()
            res.append(ent)
    json.dump(res, sys.stdout, indent=1)
    print()

main()
