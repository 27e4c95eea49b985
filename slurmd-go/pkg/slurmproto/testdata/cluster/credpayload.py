#!/usr/bin/env python3
"""Save the signed bytes of every credential inside golden frames.

usage: credpayload.py [--munge-socket PATH] FRAME.bin...

For each frame, every munge credential string in its body ("MUNGE:...:",
NUL-terminated: job, sbcast and reattach credentials under cred/munge) is
decoded with `unmunge -o` and its payload written to
FRAME.cred-payload.bin (FRAME.cred-payload-<n>.bin for the n-th when there
are several). Every JWT in the body (cred/slurm, packstr(token)) gets the
base64 `payload` claim decoded the same way, and its claims written to
FRAME.cred-claims.json. One line per credential goes to stdout. The auth
block (before the body) is not looked at.

munge credentials decode only while the munged that made them runs with the
same key; expired ones still yield their payload (unmunge reports the
status).
"""
import base64
import json
import os
import struct
import subprocess
import sys


def body_of(frame):
    n = struct.unpack(">I", frame[:4])[0]
    if n != len(frame) - 4:
        raise ValueError("length prefix %d, %d bytes follow" % (n, len(frame) - 4))
    version = struct.unpack(">H", frame[4:6])[0]
    off = 4 + 2 + 2 + (2 if version < 0x2600 else 0) + 2  # version flags [msg_index] msg_type
    blen = struct.unpack(">I", frame[off:off + 4])[0]
    return frame[len(frame) - blen:]


def strings_from(body, prefix):
    """Every NUL-terminated string of body that starts with prefix."""
    out, i = [], 0
    while True:
        i = body.find(prefix, i)
        if i < 0:
            return out
        j = body.find(b"\0", i)
        if j < 0:
            return out
        out.append(body[i:j])
        i = j + 1


def b64url(s):
    return base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))


def main():
    args = sys.argv[1:]
    sock = None
    if args[:1] == ["--munge-socket"]:
        sock, args = args[1], args[2:]
    for path in args:
        body = body_of(open(path, "rb").read())
        base = path[:-4] if path.endswith(".bin") else path
        found = []
        for cred in strings_from(body, b"MUNGE:"):
            found.append(("munge", cred))
        # A JWT's base64url header starts with '{"' = "eyJ".
        for tok in strings_from(body, b"eyJ"):
            if tok.count(b".") == 2:
                found.append(("jwt", tok))
        for k, (kind, cred) in enumerate(found):
            suffix = "" if len(found) == 1 else "-%d" % (k + 1)
            out = base + ".cred-payload%s.bin" % suffix
            if kind == "munge":
                cmd = ["unmunge", "-o", out, "-m", "/dev/stdout"]
                if sock:
                    cmd[1:1] = ["-S", sock]
                r = subprocess.run(cmd, input=cred, capture_output=True)
                status = next((l for l in r.stdout.decode().splitlines() if l.startswith("STATUS:")), r.stderr.decode().strip())
                size = os.path.getsize(out) if os.path.exists(out) else -1
                print("%s\tmunge cred %d chars -> %s (%d bytes) %s" % (path, len(cred), out, size, " ".join(status.split())))
            else:
                claims = json.loads(b64url(cred.split(b".")[1]))
                payload = base64.b64decode(claims.get("payload", ""))
                with open(out, "wb") as f:
                    f.write(payload)
                with open(base + ".cred-claims%s.json" % suffix, "w") as f:
                    json.dump(claims, f, indent=1, sort_keys=True)
                    f.write("\n")
                print("%s\tjwt %d chars context=%s -> %s (%d bytes)" % (path, len(cred), claims.get("context"), out, len(payload)))


if __name__ == "__main__":
    main()
