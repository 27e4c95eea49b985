#!/usr/bin/env python3
"""Regenerate the message-type and return-code tables from Slurm source trees.

Only names and numbers are taken (interface facts); no Slurm code is copied.

usage: genenums.py <release>=<slurm-src-root>... <out-dir>
       genenums.py --check <release>=<slurm-src-root>[=<chroot>]...

e.g.   genenums.py 22.05.8=/work/src/slurm-22.05 24.11.5=/work/src/slurm-24.11 \
           26.05.4-pre=/work/src/slurm-26.05 .
or, from pkg/slurmproto (msgtype.go's go:generate line),
       SLURM_SRC="22.05.8=/work/src/slurm-22.05 24.11.5=... 26.05.4-pre=..." go generate

An argument may hold several pairs separated by blanks.

<release> is the release the tree holds (it is written into the DO NOT EDIT
headers); its major.minor must match the tree's SLURM_PROTOCOL_VERSION define.

Writes:
  msgtype_table.go           the union of every release's slurm_msg_type_t
                             (MsgType constants and msgTypeNames)
  rc_table.go                the union of every release's slurm_err_t
                             (untyped constants and rcNames)
  msgtype_releases_table.go  msgTypeNamesByVersion: per protocol version, the
                             numbers that release defines, by name
  rc_releases_table.go       rcNamesByVersion, the same for return codes

Where a name has different numbers in different releases, its constant has the
oldest release's number (so every 22.05 constant stays what it was); where a
number has different names, each release's table has its own. The generated
files list every such case in a comment. msgTypeNames and rcNames, behind
MsgType.String/Known and RCName, are the oldest release's table.

--check compares what was parsed with the installed binaries and headers of
each release: every parsed error code is compiled against that release's
installed <slurm/slurm_errno.h>, and rpc_num2string() of that release's
libslurmfull names every number it knows: each must be in the parsed
table under the same name. Without a chroot
the host's installation is used. gcc and libslurm-dev must be installed
there. Differences are printed; the exit status is 1 if any is found.
"""
import os
import re
import subprocess
import sys
import tempfile

INITIALISMS = {"RC": "RC", "ID": "ID", "PMI": "PMI", "KVS": "KVS", "DBD": "DBD",
               "FS": "FS", "MPI": "MPI", "UID": "UID", "GID": "GID", "IO": "IO",
               "KNL": "KNL", "QOS": "QOS", "GRES": "GRES", "TRES": "TRES",
               "CPU": "CPU", "SID": "SID", "DB": "DB", "MCS": "MCS", "X11": "X11",
               "REST": "REST", "ACCT": "Acct", "PIDS": "Pids", "CTLD": "Ctld",
               "SLURMCTLD": "Slurmctld", "SLURMD": "Slurmd", "ESLURMD": "ESlurmd",
               "ESLURM": "ESlurm", "ESPANK": "ESpank", "ESCRIPT": "EScript",
               "INX": "Inx", "SLURMSCRIPTD": "Slurmscriptd", "TOOMANYSTEPS": "TooManySteps",
               "NOTRUNNING": "NotRunning", "NOTSUSPENDED": "NotSuspended"}


def goname(c):
    out = []
    for w in c.split("_"):
        if w in INITIALISMS:
            out.append(INITIALISMS[w])
        else:
            out.append(w[:1] + w[1:].lower())
    return "".join(out)


def parse_enum(text, start, end):
    """(name, value) pairs of the C enum that begins at start and ends at end."""
    body = text[text.index(start):]
    body = body[:body.index(end)]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    val = None
    res = []
    for item in body.split("{", 1)[1].split(","):
        item = item.strip()
        if not item or item.startswith("}"):
            continue
        m = re.match(r"^([A-Z0-9_]+)\s*(?:=\s*(\d+))?$", item)
        if not m:
            raise SystemExit("genenums: cannot parse enum item %r" % item)
        name, v = m.group(1), m.group(2)
        val = int(v) if v is not None else val + 1
        res.append((name, val))
    return res


class Release:
    """One source tree: its release name, protocol version and both enums."""

    def __init__(self, label, root, chroot=None):
        self.label, self.root, self.chroot = label, root, chroot
        self.version, self.series = protocol_version(root)
        if not label.startswith(self.series + "."):
            raise SystemExit("genenums: %s holds Slurm %s (SLURM_PROTOCOL_VERSION 0x%04x), not %s"
                             % (root, self.series, self.version, label))
        # 23.02 moved slurm_msg_type_t out of slurm_protocol_defs.h.
        self.msg_file = "src/common/msg_type.h"
        if not os.path.exists(os.path.join(root, self.msg_file)):
            self.msg_file = "src/common/slurm_protocol_defs.h"
        text = open(os.path.join(root, self.msg_file)).read()
        msgs = parse_enum(text, "typedef enum {\n\tREQUEST_NODE_REGISTRATION_STATUS", "} slurm_msg_type_t;")
        # DEFUNCT_RPC_* are placeholders that keep the numbering; no message has them.
        self.msgs = [(n, v) for (n, v) in msgs if not n.startswith("DEFUNCT_")]
        self.err_file = "slurm/slurm_errno.h"
        self.errs = parse_enum(open(os.path.join(root, self.err_file)).read(), "typedef enum {", "} slurm_err_t;")
        for kind, pairs in (("message type", self.msgs), ("error code", self.errs)):
            nums = {}
            for n, v in pairs:
                if v in nums:
                    raise SystemExit("genenums: %s: %s %s and %s share %d" % (label, kind, nums[v], n, v))
                nums[v] = n

    def source(self, kind):
        return "Slurm %s %s" % (self.label, self.msg_file if kind == "msg" else self.err_file)


def protocol_version(root):
    """SLURM_PROTOCOL_VERSION of a tree and its release series ("24.11")."""
    text = open(os.path.join(root, "src/common/slurm_protocol_common.h")).read()
    m = re.search(r"^#define\s+SLURM_PROTOCOL_VERSION\s+SLURM_(\d+)_(\d+)_PROTOCOL_VERSION\b", text, re.M)
    if not m:
        raise SystemExit("genenums: no SLURM_PROTOCOL_VERSION define in " + root)
    major, minor = m.group(1), m.group(2)
    d = re.search(r"^#define\s+SLURM_%s_%s_PROTOCOL_VERSION\s+(.*)$" % (major, minor), text, re.M).group(1)
    m = re.match(r"\(\((\d+)\s*<<\s*8\)\s*\|\s*0\)", d) or re.match(r"MAKE_SLURM_VER\((\d+)\)", d)
    if not m:
        raise SystemExit("genenums: cannot read protocol version %r in %s" % (d, root))
    return int(m.group(1)) << 8, "%s.%s" % (major, minor)


def union(releases, attr):
    """Union of the (name, value) pairs, in order of value then release.

    Returns (pairs, by_name, by_num, name_conflicts, num_conflicts), where a
    pair's value and a number's name are the oldest release's.
    """
    by_name, by_num = {}, {}
    for r in releases:
        for n, v in getattr(r, attr):
            by_name.setdefault(n, []).append((r, v))
            by_num.setdefault(v, []).append((r, n))
    name_conflicts = {n: l for n, l in by_name.items() if len({v for _, v in l}) > 1}
    num_conflicts = {v: l for v, l in by_num.items() if len({n for _, n in l}) > 1}
    pairs = sorted(((n, l[0][1]) for n, l in by_name.items()), key=lambda p: (p[1], p[0]))
    return pairs, by_name, by_num, name_conflicts, num_conflicts


def header(releases, kind):
    return ("// Code generated by internal/genenums/genenums.py from %s; DO NOT EDIT.\n\n"
            % ", ".join(r.source(kind) for r in releases))


def conflict_comment(name_conflicts, num_conflicts, fmt_num):
    lines = []
    if name_conflicts:
        lines.append("Names whose number differs between releases (the constant has the oldest")
        lines.append("release's number):")
        for n in sorted(name_conflicts):
            lines.append("  %s: %s" % (n, ", ".join("%s %s" % (r.label, fmt_num(v)) for r, v in name_conflicts[n])))
    if num_conflicts:
        lines.append("Numbers whose name differs between releases (each release's table has its")
        lines.append("own; the constants are the names of every release):")
        for v in sorted(num_conflicts):
            lines.append("  %s: %s" % (fmt_num(v), ", ".join("%s %s" % (r.label, n) for r, n in num_conflicts[v])))
    if not lines:
        return ""
    return "".join("// " + l + "\n" for l in lines) + "\n"


def write_union(path, releases, pairs, by_name, name_conflicts, num_conflicts, kind):
    with open(path, "w") as f:
        f.write(header(releases, kind))
        f.write("package slurmproto\n\n")
        f.write(conflict_comment(name_conflicts, num_conflicts, str))
        if kind == "msg":
            f.write("// Message types (slurm_msg_type_t) of every release above. A type that not\n"
                    "// every release defines says which ones do.\nconst (\n")
        else:
            f.write("// Slurm error codes (slurm_err_t) of every release above. Untyped so they fit\n"
                    "// both the uint32 wire fields and int-valued Go code. A code that not every\n"
                    "// release defines says which ones do.\nconst (\n")
        typ = " MsgType" if kind == "msg" else ""
        for n, v in pairs:
            rels = [r for r, _ in by_name[n]]
            note = ""
            if len(rels) != len(releases):
                note = " // " + ", ".join(r.label for r in rels) + " only"
            if n in name_conflicts:
                note = " // " + ", ".join("%s: %d" % (r.label, x) for r, x in by_name[n])
            f.write("\t%s%s = %d%s\n" % (goname(n), typ, v, note))
        f.write(")\n\n")
        var, byv, api = ("msgTypeNames", "msgTypeNamesByVersion", "msgtype.go's String and Known") \
            if kind == "msg" else ("rcNames", "rcNamesByVersion", "rc.go's RCName")
        old = releases[0]
        f.write("// %s is Slurm %s's table: %s promise its names\n"
                "// and no others. Version-aware lookups use %s.\n" % (var, old.label, api, byv))
        f.write("var %s = %s[0x%04x]\n" % (var, byv, old.version))


def write_releases(path, releases, by_name, name_conflicts, num_conflicts, kind):
    var, key = ("msgTypeNamesByVersion", "MsgType") if kind == "msg" else ("rcNamesByVersion", "uint32")
    with open(path, "w") as f:
        f.write(header(releases, kind))
        f.write("package slurmproto\n\n")
        f.write(conflict_comment(name_conflicts, num_conflicts, str))
        what = "message type" if kind == "msg" else "return code"
        f.write("// %s maps a protocol version (SLURM_PROTOCOL_VERSION of a release) to\n"
                "// every %s that release defines, by that release's name. An entry\n"
                "// whose union constant has another value is written as a number.\n" % (var, what))
        f.write("var %s = map[uint16]map[%s]string{\n" % (var, key))
        for r in releases:
            f.write("\t0x%04x: { // Slurm %s\n" % (r.version, r.label))
            for n, v in sorted(r.msgs if kind == "msg" else r.errs, key=lambda p: p[1]):
                const_val = by_name[n][0][1]
                k = goname(n) if const_val == v else ("%s(%d)" % (key, v))
                f.write("\t\t%s: %s,\n" % (k, '"%s"' % n))
            f.write("\t},\n")
        f.write("}\n")


def generate(out, releases):
    files = []
    for kind, attr, union_file, rel_file in (("msg", "msgs", "msgtype_table.go", "msgtype_releases_table.go"),
                                             ("rc", "errs", "rc_table.go", "rc_releases_table.go")):
        pairs, by_name, by_num, name_c, num_c = union(releases, attr)
        write_union(os.path.join(out, union_file), releases, pairs, by_name, name_c, num_c, kind)
        write_releases(os.path.join(out, rel_file), releases, by_name, name_c, num_c, kind)
        files += [os.path.join(out, union_file), os.path.join(out, rel_file)]
        for n in sorted(name_c):
            print("genenums: %s %s has different numbers: %s" % (kind, n, ", ".join(
                "%s=%d" % (r.label, v) for r, v in name_c[n])), file=sys.stderr)
        for v in sorted(num_c):
            print("genenums: %s %d has different names: %s" % (kind, v, ", ".join(
                "%s=%s" % (r.label, n) for r, n in num_c[v])), file=sys.stderr)
    return files


def run_in(chroot, argv, **kw):
    if chroot:
        argv = ["chroot", chroot] + argv
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


CHECK_C = r"""
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <slurm/slurm_errno.h>
extern char *rpc_num2string(uint16_t msg_type);
int main(void)
{
%(errs)s
	for (unsigned i = 0; i <= 0xffff; i++) {
		char *s = rpc_num2string(i);
		if (strtoul(s, NULL, 10) != i)
			printf("msg %%u %%s\n", i, s);
	}
	return 0;
}
"""


def check(releases):
    """Compare the parsed tables with each release's installed build."""
    bad = 0
    for r in releases:
        tmp = tempfile.mkdtemp(prefix="genenums-", dir="/tmp")  # /tmp is shared with the chroots
        src = os.path.join(tmp, "check.c")
        errs = "".join('\tprintf("err %%s %%d\\n", "%s", (int) %s);\n' % (n, n) for n, _ in r.errs)
        with open(src, "w") as f:
            f.write(CHECK_C % {"errs": errs})
        lib = run_in(r.chroot, ["sh", "-c", "ls -d /usr/lib/*/slurm-wlm | head -1"]).strip()
        run_in(r.chroot, ["gcc", "-o", tmp + "/check", src, "-L" + lib, "-Wl,-rpath," + lib, "-lslurmfull"])
        out = run_in(r.chroot, [tmp + "/check"])
        got_err, got_msg = {}, {}
        for line in out.splitlines():
            kind, a, b = line.split(" ", 2)
            if kind == "err":
                got_err[a] = int(b)
            else:
                got_msg[int(a)] = b
        for n, v in r.errs:
            if got_err.get(n) != v:
                bad += 1
                print("check %s: error %s parsed %d, installed header %s" % (r.label, n, v, got_err.get(n)))
        unnamed = []
        for n, v in r.msgs:
            got = got_msg.pop(v, None)
            if got is None:
                unnamed.append(n)
            elif got.rstrip(",") != n:  # 22.05's string for 1023 ends in a stray comma
                bad += 1
                print("check %s: message %d parsed %s, rpc_num2string %s" % (r.label, v, n, got))
        for v, got in sorted(got_msg.items()):
            bad += 1
            print("check %s: message %d is %s in rpc_num2string, missing from the parsed enum" % (r.label, v, got))
        if unnamed:
            print("check %s: rpc_num2string has no name for %s" % (r.label, " ".join(unnamed)))
        print("check %s (0x%04x, %s): %d error codes, %d message types compared"
              % (r.label, r.version, r.chroot or "host", len(r.errs), len(r.msgs)))
    return bad


def parse_args(args):
    """Releases from label=root[=chroot] words; an argument may hold several,
    separated by blanks (so go:generate's single $SLURM_SRC can carry all)."""
    releases = []
    for a in args:
        for w in a.split():
            parts = w.split("=")
            if len(parts) not in (2, 3):
                raise SystemExit(__doc__)
            releases.append(Release(*parts))
    if not releases:
        raise SystemExit(__doc__)
    releases.sort(key=lambda r: r.version)
    return releases


def main():
    args = sys.argv[1:]
    if args and args[0] == "--check":
        sys.exit(1 if check(parse_args(args[1:])) else 0)
    # The output directory is the one argument that is not a label=root pair
    # (msgtype.go's go:generate line passes it last, the releases first).
    outs = [a for a in args if "=" not in a]
    if len(outs) != 1:
        raise SystemExit(__doc__)
    files = generate(outs[0], parse_args([a for a in args if "=" in a]))
    # The tables are committed gofmt-clean; gofmt aligns the columns.
    subprocess.run(["gofmt", "-w"] + files, check=True)


if __name__ == "__main__":
    main()
