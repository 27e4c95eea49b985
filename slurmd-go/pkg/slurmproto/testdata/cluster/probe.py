#!/usr/bin/env python3
"""Send one re-versioned, freshly signed copy of a captured frame to a daemon
and record what comes back.

usage: probe.py --munge-socket PATH --version 0xVVVV --frame FRAME.bin
                --out-request REQ.bin --out-reply REPLY HOST PORT

The request is FRAME.bin with its header's version field set to VVVV and its
munge credential replaced by a fresh one (munge -S PATH) over the same payload
(unmunge of the old credential: the body hash, still valid since the body is
unchanged). Only the version changes: every header from 0x2600 on keeps
version, flags, msg_type and body_length at the same places, so a 0x2A00 or
0x2D00 frame needs nothing else.

The reply is read until the peer closes the connection or 10 s pass. If it
starts with a length prefix that covers the bytes that came, the first frame
is written to REPLY.bin; anything else is written verbatim to REPLY.raw. One
line on stdout says what happened: reply frame (version, flags, msg_type, rc
of a RESPONSE_SLURM_RC body), other bytes, closed with nothing, or timeout.
"""
import argparse
import socket
import struct
import subprocess
import time

AUTH_MUNGE = 101
NO_AUTH = 0x0040


def header_fields(frame):
    version, flags = struct.unpack(">HH", frame[4:8])
    off = 8 + (2 if version < 0x2600 else 0)
    msg_type, blen = struct.unpack(">HI", frame[off:off + 6])
    return version, flags, msg_type, blen


def auth_span(frame):
    """(start, end) of the auth block's packstr (u32 length, bytes, NUL)."""
    _, flags, _, blen = header_fields(frame)
    body_at = len(frame) - blen
    if flags & NO_AUTH:
        return None
    i = frame.rfind(b"MUNGE:", 0, body_at)
    if i < 8 or frame[body_at - 1] != 0:
        raise SystemExit("probe: no munge credential before the body")
    start = i - 4
    n = struct.unpack(">I", frame[start:i])[0]
    plugin = struct.unpack(">I", frame[start - 4:start])[0]
    if start + 4 + n != body_at or plugin != AUTH_MUNGE:
        raise SystemExit("probe: the munge credential is not the whole auth block")
    return start, body_at


def resign(frame, version, sock):
    start, end = auth_span(frame)
    old = frame[start + 4:end - 1]
    payload = subprocess.run(["unmunge", "-S", sock, "-m", "/dev/null"], input=old,
                             capture_output=True).stdout
    new = subprocess.run(["munge", "-S", sock], input=payload, capture_output=True,
                         check=True).stdout.strip()
    auth = struct.pack(">I", len(new) + 1) + new + b"\0"
    out = struct.pack(">H", version) + frame[6:start] + auth + frame[end:]
    return struct.pack(">I", len(out)) + out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--munge-socket", required=True)
    ap.add_argument("--version", required=True, type=lambda s: int(s, 0))
    ap.add_argument("--frame", required=True)
    ap.add_argument("--out-request", required=True)
    ap.add_argument("--out-reply", required=True)
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    a = ap.parse_args()
    req = resign(open(a.frame, "rb").read(), a.version, a.munge_socket)
    open(a.out_request, "wb").write(req)
    s = socket.create_connection((a.host, a.port), timeout=10)
    s.sendall(req)
    got, deadline, why = b"", time.time() + 10, "closed"
    while True:
        s.settimeout(max(0.1, deadline - time.time()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            why = "timeout"
            break
        if not chunk:
            break
        got += chunk
        if len(got) >= 4 and struct.unpack(">I", got[:4])[0] + 4 == len(got):
            why = "frame"
            break
    s.close()
    head = "probe %s:%d version=0x%04x type=%d ->" % (a.host, a.port, a.version, header_fields(req)[2])
    if not got:
        print(head, "%s with no reply" % why)
        return
    n = struct.unpack(">I", got[:4])[0] if len(got) >= 4 else 0
    if 16 <= n <= len(got) - 4:
        frame = got[:4 + n]
        open(a.out_reply + ".bin", "wb").write(frame)
        v, f, t, blen = header_fields(frame)
        rc = ""
        if t == 8001 and blen == 4:
            rc = " rc=%d" % struct.unpack(">I", frame[-4:])[0]
        print(head, "reply frame %d bytes: version=0x%04x flags=0x%04x type=%d body=%d%s (%s)"
              % (len(frame), v, f, t, blen, rc, why))
    else:
        open(a.out_reply + ".raw", "wb").write(got)
        print(head, "%d bytes that are no frame: %r (%s)" % (len(got), got[:60], why))


if __name__ == "__main__":
    main()
