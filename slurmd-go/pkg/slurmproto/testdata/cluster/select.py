#!/usr/bin/env python3
"""Pick the golden frames out of a capture (capture.sh's out/ directory) and
copy them into testdata under their golden names.

usage: select.py KIND OUT_DIR DEST_DIR > table.md

KIND is "session" (the capture.sh session workload) or "cross" (capture.sh
cross). Each rule below names a frame by who captured it, its direction, type,
version and header shape (and, where the order of jobs does not say enough, a
string of its body); a reply is found as the other direction of the request's
connection (goldencap's index names each frame's connection). Every file goes
to DEST_DIR/<name>_v<version>.bin; a job credential's payload, when
credpayload.py decoded one, goes beside it as <name>_cred_payload.bin (and a
JWT's claims as <name>_cred_claims.json). The README table (file, captured as,
what) is printed. A rule that matches nothing is an error, except those
marked optional, which are listed at the end.
"""
import base64
import json
import os
import re
import shutil
import struct
import sys

LINE = re.compile(r'^(\S+)\t(\S+) fd=(\d+) conn=(\S+) len=(\d+) (?:flags=(0x[0-9a-f]+) fwd=(\d+)/"([^"]*)"'
                  r'(?: depth=(\d+))? ret=(\d+) auth=(\d+) body=(\d+)|nodeid=.*? bytes)( dup (send|recv))?$')
NAME = re.compile(r'^([a-z0-9]+)-(send|recv)-(\S+)-v([0-9a-f]{4})-(\d+)\.bin$')


class Frame:
    def __init__(self, m, out):
        self.name, self.file, self.conn = m.group(1), m.group(2), m.group(4)
        io = m.group(6) is None  # an io_init_msg, not an RPC frame
        self.flags = 0 if io else int(m.group(6), 16)
        self.fwd, self.fwd_nodes = (0, "") if io else (int(m.group(7)), m.group(8))
        self.ret, self.auth = (0, 0) if io else (int(m.group(10)), int(m.group(11)))
        self.body = int(m.group(5)) - 4 if io else int(m.group(12))
        self.dup = m.group(13) is not None
        n = NAME.match(self.name)
        self.who, self.dir, self.type, self.ver = n.group(1), n.group(2), n.group(3), n.group(4)
        if self.dup:
            self.dir = m.group(14)  # the direction of this sighting
            self.who = os.path.basename(self.file).split(".")[0].replace("trace-", "")
        self.path = os.path.join(out, self.name)

    def content(self):
        return open(self.path, "rb").read()


# A whole step id (pack_step_id, 24.11 on): u64 sluid (0 from 24.11, set
# from 26.05), u32 job_id, u32 step_id (a real step or a special one,
# SLURM_BATCH_SCRIPT ... NO_VAL), u32 step_het_comp (NO_VAL).
STEP = re.compile(rb"(?<=.{8})(?=(.{4})(?:\xff\xff\xff[\xfa-\xfe]|\x00\x00[\x00-\x03].)\xff\xff\xff\xfe)", re.S)


def jobs_in(f):
    """Job ids the frame's body names, found by their place rather than by
    decoding: REQUEST_COMPLETE_BATCH_SCRIPT's job id 16 bytes before its final
    node_name string (24.11: job_id job_rc slurm_rc uid; 26.05: step id
    job_id step_id het_comp, uid), 24.11's REQUEST_LAUNCH_PROLOG job_id after
    a u16 gres count, otherwise every whole step id (STEP) in the body and in
    the payload of any JWT in it (cred/slurm)."""
    b = f.content()
    body = b[len(b) - f.body:]
    if f.type == "REQUEST_COMPLETE_BATCH_SCRIPT":
        for n in range(2, 64):
            if body[-1:] == b"\0" and len(body) >= n + 20 and struct.unpack(">I", body[-n - 4:-n])[0] == n:
                return {struct.unpack(">I", body[-n - 20:-n - 16])[0]}
        return set()
    if f.type == "REQUEST_LAUNCH_PROLOG" and f.ver == "2a00" and b"eyJ" not in body:
        return {struct.unpack(">I", body[2:6])[0]}
    blobs = [body]
    for tok in re.findall(rb"eyJ[A-Za-z0-9_.-]+", body):
        parts = tok.split(b".")
        if len(parts) == 3:
            claims = json.loads(base64.urlsafe_b64decode(parts[1] + b"=" * (-len(parts[1]) % 4)))
            blobs.append(base64.b64decode(claims.get("payload", "")))
    ids = set()
    for blob in blobs:
        for m in STEP.finditer(blob):
            j = struct.unpack(">I", m.group(1))[0]
            if 0 < j < 1000:
                ids.add(j)
    return ids


def load(out):
    frames = []
    for line in open(os.path.join(out, "index.txt")):
        m = LINE.match(line.rstrip("\n"))
        if not m:
            raise SystemExit("select: cannot read index line %r" % line)
        frames.append(Frame(m, out))
    return frames


class Selector:
    def __init__(self, frames, version, min_version):
        self.frames, self.version, self.min = frames, version, min_version
        self.picked = {}

    def pick(self, who, d, types, ver="V", fwd=None, ret=None, has=None, job=None, nth=1):
        types = [types] if isinstance(types, str) else types
        want = {"V": self.version, "MIN": self.min}.get(ver, ver)
        n = 0
        for f in self.frames:
            if f.dup or f.who != who or f.dir != d or f.type not in types or f.ver != want:
                continue
            if fwd is not None and f.fwd != fwd:
                continue
            if ret is not None and f.ret != ret:
                continue
            if has is not None and has not in f.content():
                continue
            if job is not None and job not in jobs_in(f):
                continue
            n += 1
            if n == nth:
                return f
        return None

    def reply(self, req):
        """The frame going the other way on req's connection, seen by the same side."""
        other = "recv" if req.dir == "send" else "send"
        got = [f for f in self.frames if f.conn == req.conn and f.conn != "-" and f.dir == other and
               (f.who == req.who or f.file == req.file)]
        names = {f.name for f in got}
        if len(names) != 1:
            return None
        return got[0]


def either(t, **kw):
    """A frame slurmctld sent, or the clean-restarted slurmctld (ctld2) did."""
    return [("ctld", "send", t, kw), ("ctld2", "send", t, kw)]


# (name, what, selector) for the session workload; "reply:<name>" is the
# reply to an earlier rule's frame. Optional rules start with "?".
SESSION = [
    ("reg_status", "n1's registration at startup (MESSAGE_NODE_REGISTRATION_STATUS)",
     ("ctld", "recv", "MESSAGE_NODE_REGISTRATION_STATUS", dict(has=b"\x00\x00\x00\x03n1\x00"))),
    ("node_reg_response", "slurmctld's RESPONSE_NODE_REGISTRATION (TRES list), sent without auth",
     ("ctld", "send", "RESPONSE_NODE_REGISTRATION", {})),
    ("req_reg_status", "REQUEST_NODE_REGISTRATION_STATUS to one node",
     ("ctld", "send", "REQUEST_NODE_REGISTRATION_STATUS", dict(fwd=0))),
    ("req_reg_status_reply", "the node's reply", "reply:req_reg_status"),
    ("req_reg_status_fwd", "the clean-restarted slurmctld's first request to n1 (forward n2), at its oldest version",
     ("ctld2", "send", "REQUEST_NODE_REGISTRATION_STATUS", dict(ver="MIN", fwd=1))),
    ("req_reg_status_fwd_reply", "n1's aggregated reply (ret_list: n2)", "reply:req_reg_status_fwd"),
    ("req_reg_status_relayed", "n1's relay of it to n2",
     ("n1", "send", "REQUEST_NODE_REGISTRATION_STATUS", dict(ver="MIN"))),
    ("req_reg_status_relayed_reply", "n2's reply to n1", "reply:req_reg_status_relayed"),
    ("req_ping", "REQUEST_PING to one node", either("REQUEST_PING", fwd=0)),
    ("ping_response", "RESPONSE_PING_SLURMD", "reply:req_ping"),
    ("req_ping_fwd", "ping to n1 with forward n2", either("REQUEST_PING", fwd=1)),
    ("ping_response_retlist", "n1's aggregated reply (ret_list: n2)", "reply:req_ping_fwd"),
    ("req_ping_relayed", "n1's relay of the ping to n2", ("n1", "send", "REQUEST_PING", {})),
    ("ping_response_leaf", "n2's reply to n1", "reply:req_ping_relayed"),
    ("?req_health_check_fwd", "REQUEST_HEALTH_CHECK to n1, forward n2",
     either("REQUEST_HEALTH_CHECK", fwd=1)),
    ("?health_check_reply_retlist", "n1's aggregated RC (ret_list: n2)", "reply:req_health_check_fwd"),
    ("?req_health_check_relayed", "n1's relay to n2", ("n1", "send", "REQUEST_HEALTH_CHECK", {})),
    ("?req_node_health_check_fwd", "26.05's REQUEST_NODE_HEALTH_CHECK (1029, health_check_report) to n1, forward n2",
     either("T1029", fwd=1)),
    ("?node_health_check_reply_retlist", "n1's aggregated RC (ret_list: n2)", "reply:req_node_health_check_fwd"),
    ("?req_node_health_check_relayed", "n1's relay to n2", ("n1", "send", "T1029", {})),
    ("req_acct_gather_update_fwd", "REQUEST_ACCT_GATHER_UPDATE (AcctGatherNodeFreq=30) to n1, forward n2",
     either("REQUEST_ACCT_GATHER_UPDATE", fwd=1)),
    ("acct_gather_update_retlist", "n1's aggregated RESPONSE_ACCT_GATHER_UPDATE (ret_list: n2)",
     "reply:req_acct_gather_update_fwd"),
    ("req_acct_gather_update_relayed", "n1's relay to n2", ("n1", "send", "REQUEST_ACCT_GATHER_UPDATE", {})),
    ("acct_gather_update_leaf", "n2's reply to n1", "reply:req_acct_gather_update_relayed"),
    ("req_daemon_status", "scontrol show slurmd (SLURMD_NODENAME=n1)", ("n1", "recv", "REQUEST_DAEMON_STATUS", {})),
    ("slurmd_status", "n1's RESPONSE_SLURMD_STATUS", "reply:req_daemon_status"),
    ("?req_reconfigure", "scontrol reconfigure: REQUEST_RECONFIGURE", ("ctld", "send", "REQUEST_RECONFIGURE", {})),
    ("?req_reconfigure_reply", "the node's reply", "reply:req_reconfigure"),
    ("?req_reconfigure_with_config", "scontrol reconfigure, configless: REQUEST_RECONFIGURE_WITH_CONFIG",
     ("ctld", "send", "REQUEST_RECONFIGURE_WITH_CONFIG", {})),
    ("?req_reconfigure_with_config_reply", "the node's reply", "reply:req_reconfigure_with_config"),
    ("?req_config", "configless n2 (--conf-server) fetching its config: REQUEST_CONFIG",
     ("ctld", "recv", "REQUEST_CONFIG", {})),
    ("?config_response", "slurmctld's RESPONSE_CONFIG", "reply:req_config"),
    ("req_shutdown", "scontrol shutdown: REQUEST_SHUTDOWN to a node", ("ctld2", "send", "REQUEST_SHUTDOWN", {})),
    # srun steps
    ("launch_tasks_1node", "root srun -N1 -n2 sh -c 'exit 3' (job 2): REQUEST_LAUNCH_TASKS",
     ("n1", "recv", "REQUEST_LAUNCH_TASKS", dict(fwd=0))),
    ("launch_tasks_1node_reply", "n1's RESPONSE_SLURM_RC_MSG", "reply:launch_tasks_1node"),
    ("launch_tasks_2node", "user srun -N2 -n2 (job 3) to n1, forward n2",
     ("n1", "recv", "REQUEST_LAUNCH_TASKS", dict(fwd=1))),
    ("launch_tasks_2node_reply", "n1's RESPONSE_SLURM_RC_MSG with ret_list (n2)", "reply:launch_tasks_2node"),
    ("launch_tasks_2node_relayed", "n1's relay to n2", ("n1", "send", "REQUEST_LAUNCH_TASKS", dict(fwd=0))),
    ("launch_tasks_2node_relayed_reply", "n2's RESPONSE_SLURM_RC_MSG to n1", "reply:launch_tasks_2node_relayed"),
    ("launch_tasks_response_2task", "job 2's RESPONSE_LAUNCH_TASKS (tasks 0-1, from n1's slurmstepd)",
     ("n1", "send", "RESPONSE_LAUNCH_TASKS", {})),
    ("launch_tasks_response", "job 3's RESPONSE_LAUNCH_TASKS from n2 (task 1)",
     ("n2", "send", "RESPONSE_LAUNCH_TASKS", {})),
    ("task_exit_2task", "job 2's MESSAGE_TASK_EXIT (tasks 0-1, status 0x300)", ("n1", "send", "MESSAGE_TASK_EXIT", {})),
    ("task_exit", "job 3's MESSAGE_TASK_EXIT from n2 (task 1, status 0x100)", ("n2", "send", "MESSAGE_TASK_EXIT", {})),
    ("io_init", "job 2's slurmstepd -> srun I/O stream opening (io_init_msg; u32 length + message, no RPC header)",
     ("n1", "send", "IO_INIT_MSG", {})),
    ("step_complete", "REQUEST_STEP_COMPLETE of job 2's step", ("ctld", "recv", "REQUEST_STEP_COMPLETE", dict(job=2))),
    ("?srun_job_complete", "SRUN_JOB_COMPLETE to srun", ("ctld", "send", "SRUN_JOB_COMPLETE", {})),
    # batch jobs
    ("batch_job_launch_user", "user job 1 (tlimit, -t 1, on n2)",
     ("ctld", "send", "REQUEST_BATCH_JOB_LAUNCH", dict(has=b"SLURM_JOB_NAME=tlimit\0"))),
    ("batch_job_launch", "root job 4 (exit 3)",
     ("ctld", "send", "REQUEST_BATCH_JOB_LAUNCH", dict(has=b"SLURM_JOB_NAME=exit3\0"))),
    ("batch_job_launch_array", "user array job 5, first task launched",
     ("ctld", "send", "REQUEST_BATCH_JOB_LAUNCH", dict(has=b"SLURM_JOB_NAME=arr\0"))),
    ("batch_job_launch_2node", "user job 7 on n[1-2] (sbcast, inner srun)",
     ("ctld", "send", "REQUEST_BATCH_JOB_LAUNCH", dict(has=b"SLURM_JOB_NAME=bcast\0"))),
    ("batch_job_launch_reply", "n1's RC to job 4's launch", "reply:batch_job_launch"),
    ("launch_prolog", "REQUEST_LAUNCH_PROLOG (PrologFlags=Alloc) of job 1, to n2",
     ("ctld", "send", "REQUEST_LAUNCH_PROLOG", dict(fwd=0, job=1))),
    ("launch_prolog_2node", "REQUEST_LAUNCH_PROLOG of job 3, to n1 forward n2",
     ("ctld", "send", "REQUEST_LAUNCH_PROLOG", dict(fwd=1, job=3))),
    ("launch_prolog_2node_reply", "n1's aggregated RC (ret_list: n2)", "reply:launch_prolog_2node"),
    ("complete_prolog", "REQUEST_COMPLETE_PROLOG", ("ctld", "recv", "REQUEST_COMPLETE_PROLOG", {})),
    ("epilog_complete", "MESSAGE_EPILOG_COMPLETE", ("ctld", "recv", "MESSAGE_EPILOG_COMPLETE", {})),
    ("terminate_job", "REQUEST_TERMINATE_JOB of job 2 (srun ended), to n1",
     ("ctld", "send", "REQUEST_TERMINATE_JOB", dict(fwd=0, job=2))),
    ("terminate_job_2node", "REQUEST_TERMINATE_JOB of job 3, to n1 forward n2",
     ("ctld", "send", "REQUEST_TERMINATE_JOB", dict(fwd=1, job=3))),
    ("terminate_job_2node_reply", "n1's aggregated RC (ret_list: n2)", "reply:terminate_job_2node"),
    ("kill_timelimit", "REQUEST_KILL_TIMELIMIT of job 1", ("ctld", "send", "REQUEST_KILL_TIMELIMIT", dict(job=1))),
    ("complete_batch_script", "REQUEST_COMPLETE_BATCH_SCRIPT of job 4 (exit 3)",
     ("ctld", "recv", "REQUEST_COMPLETE_BATCH_SCRIPT", dict(job=4))),
    # the long job 8 and job 9
    ("signal_tasks", "scancel -s USR1 8: REQUEST_SIGNAL_TASKS to n1 forward n2",
     ("ctld", "send", "REQUEST_SIGNAL_TASKS", dict(fwd=1))),
    ("signal_tasks_batch", "scancel -b -s USR1 8: the batch step, n1 only",
     ("ctld", "send", "REQUEST_SIGNAL_TASKS", dict(fwd=0))),
    ("job_notify", "scontrol notify 8 hello", ("ctld", "send", "REQUEST_JOB_NOTIFY", dict(has=b"hello"))),
    ("suspend_int", "scontrol suspend 8 (REQUEST_SUSPEND_INT, forward n2)", ("ctld", "send", "REQUEST_SUSPEND_INT", {})),
    ("suspend_int_resume", "scontrol resume 8", ("ctld", "send", "REQUEST_SUSPEND_INT", dict(nth=2))),
    ("terminate_tasks", "scancel -s KILL 8.0 (scancel itself to n1, forward n2): REQUEST_TERMINATE_TASKS",
     ("n1", "recv", "REQUEST_TERMINATE_TASKS", {})),
    ("terminate_tasks_reply", "n1's aggregated RC", "reply:terminate_tasks"),
    ("job_step_stat", "sstat -a -j 8: REQUEST_JOB_STEP_STAT of step 8.0 to n1, forward n2",
     ("n1", "recv", "REQUEST_JOB_STEP_STAT", dict(fwd=1))),
    ("job_step_stat_retlist", "n1's aggregated RESPONSE_JOB_STEP_STAT (ret_list: n2)", "reply:job_step_stat"),
    ("job_step_stat_relayed", "n1's relay to n2", ("n1", "send", "REQUEST_JOB_STEP_STAT", dict(fwd=0))),
    ("job_step_stat_leaf", "n2's RESPONSE_JOB_STEP_STAT", "reply:job_step_stat_relayed"),
    ("job_step_pids", "getpids 8 0 n[1-2] (slurm_job_step_get_pids): REQUEST_JOB_STEP_PIDS, forward n2",
     ("n1", "recv", "REQUEST_JOB_STEP_PIDS", {})),
    ("job_step_pids_retlist", "n1's aggregated RESPONSE_JOB_STEP_PIDS", "reply:job_step_pids"),
    ("reattach_tasks", "sattach 8.0: REQUEST_REATTACH_TASKS", ("n1", "recv", "REQUEST_REATTACH_TASKS", {})),
    ("reattach_tasks_response", "RESPONSE_REATTACH_TASKS", "reply:reattach_tasks"),
    ("job_id", "scontrol pidinfo <task pid>: REQUEST_JOB_ID to n1", ("n1", "recv", "REQUEST_JOB_ID", {})),
    ("job_id_response", "RESPONSE_JOB_ID", "reply:job_id"),
    ("file_bcast", "sbcast in job 7: REQUEST_FILE_BCAST to one node (sbcast sends to each node itself, flag USE_BCAST_NETWORK)",
     [("n1", "send", "REQUEST_FILE_BCAST", {}), ("n1", "recv", "REQUEST_FILE_BCAST", {})]),
    ("file_bcast_reply", "the node's RC", "reply:file_bcast"),
    ("terminate_job_cancelled", "scancel 9: REQUEST_TERMINATE_JOB",
     ("ctld", "send", "REQUEST_TERMINATE_JOB", dict(fwd=0, job=9))),
    ("complete_batch_script_timeout", "REQUEST_COMPLETE_BATCH_SCRIPT of job 1 after its time limit",
     ("ctld", "recv", "REQUEST_COMPLETE_BATCH_SCRIPT", dict(job=1))),
    ("job_requeue", "job 10's failed Prolog: n1's REQUEST_JOB_REQUEUE to slurmctld (--no-requeue)",
     ("ctld", "recv", "REQUEST_JOB_REQUEUE", {})),
    ("job_requeue_reply", "slurmctld's RC (ESLURM_DISABLED)", "reply:job_requeue"),
]

# The cross run: 26.05 slurmctld and 26.05 clients, 24.11 stock slurmd nodes.
CROSS = [
    ("reg_status", "n1's (24.11) registration at startup",
     ("ctld", "recv", "MESSAGE_NODE_REGISTRATION_STATUS", dict(has=b"\x00\x00\x00\x03n1\x00"))),
    ("node_reg_response", "the 26.05 slurmctld's RESPONSE_NODE_REGISTRATION",
     ("ctld", "send", "RESPONSE_NODE_REGISTRATION", {})),
    ("req_reg_status", "REQUEST_NODE_REGISTRATION_STATUS to one node",
     ("ctld", "send", "REQUEST_NODE_REGISTRATION_STATUS", dict(fwd=0))),
    ("req_reg_status_reply", "the node's reply", "reply:req_reg_status"),
    ("req_reg_status_fwd", "the clean-restarted slurmctld's first request to n1 (forward n2), at its oldest version",
     ("ctld2", "send", "REQUEST_NODE_REGISTRATION_STATUS", dict(fwd=1))),
    ("req_reg_status_fwd_reply", "n1's aggregated reply (ret_list: n2)", "reply:req_reg_status_fwd"),
    ("req_reg_status_relayed", "n1's relay to n2", ("n1", "send", "REQUEST_NODE_REGISTRATION_STATUS", {})),
    ("req_reg_status_relayed_reply", "n2's reply to n1", "reply:req_reg_status_relayed"),
    ("req_ping_fwd", "ping to n1 with forward n2", either("REQUEST_PING", fwd=1)),
    ("ping_response_retlist", "n1's aggregated reply (ret_list: n2)", "reply:req_ping_fwd"),
    ("req_ping_relayed", "n1's relay of the ping to n2", ("n1", "send", "REQUEST_PING", {})),
    ("ping_response_leaf", "n2's reply to n1", "reply:req_ping_relayed"),
    ("req_health_check_fwd", "REQUEST_HEALTH_CHECK to n1, forward n2", either("REQUEST_HEALTH_CHECK", fwd=1)),
    ("health_check_reply_retlist", "n1's aggregated RC (ret_list: n2)", "reply:req_health_check_fwd"),
    ("req_reconfigure", "scontrol reconfigure: REQUEST_RECONFIGURE", ("ctld", "send", "REQUEST_RECONFIGURE", {})),
    ("req_shutdown", "scontrol shutdown: REQUEST_SHUTDOWN to a node", ("ctld2", "send", "REQUEST_SHUTDOWN", {})),
    ("req_daemon_status", "26.05 scontrol show slurmd to the 24.11 n1: sent at 0x2D00, which the node refuses "
     "(it closes the connection, no reply)", ("n1", "recv", "REQUEST_DAEMON_STATUS", dict(ver="2d00"))),
    ("launch_tasks_1node", "root srun -N1 -n2 (job 1, allocated at once): REQUEST_LAUNCH_TASKS at 0x2A00",
     ("n1", "recv", "REQUEST_LAUNCH_TASKS", dict(fwd=0))),
    ("launch_tasks_1node_reply", "n1's RESPONSE_SLURM_RC_MSG", "reply:launch_tasks_1node"),
    ("launch_tasks_response_2task", "job 1's RESPONSE_LAUNCH_TASKS (tasks 0-1)", ("n1", "send", "RESPONSE_LAUNCH_TASKS", {})),
    ("task_exit_2task", "job 1's MESSAGE_TASK_EXIT (tasks 0-1, status 0x300)", ("n1", "send", "MESSAGE_TASK_EXIT", {})),
    ("io_init", "job 1's slurmstepd -> srun io_init_msg (u32 length + message)", ("n1", "send", "IO_INIT_MSG", {})),
    ("launch_tasks_2node", "user srun -N2 -n2 (job 2, queued, then allocated): the 26.05 srun sends REQUEST_LAUNCH_TASKS "
     "at 0x2D00 (forward n2); the 24.11 n1 refuses it (unpack_header) and closes; the step launch fails",
     ("n1", "recv", "REQUEST_LAUNCH_TASKS", dict(ver="2d00", fwd=1))),
    ("launch_tasks_2node_direct", "srun's retry straight to n2 after the failed forward, also at 0x2D00, also refused",
     ("n2", "recv", "REQUEST_LAUNCH_TASKS", dict(ver="2d00"))),
    ("batch_job_launch_2node", "user job 3 on n[1-2] (inner srun, exit 3)",
     ("ctld", "send", "REQUEST_BATCH_JOB_LAUNCH", dict(has=b"SLURM_JOB_NAME=twonode\0"))),
    ("batch_job_launch_2node_reply", "n1's RC", "reply:batch_job_launch_2node"),
    ("launch_tasks_batch_2node", "job 3's inner srun (26.05, inside the allocation) to n1, forward n2: at 0x2A00",
     ("n1", "send", "REQUEST_LAUNCH_TASKS", dict(fwd=1))),
    ("launch_tasks_batch_2node_reply", "n1's RESPONSE_SLURM_RC_MSG with ret_list (n2)", "reply:launch_tasks_batch_2node"),
    ("launch_tasks_batch_2node_relayed", "n1's relay to n2", ("n1", "send", "REQUEST_LAUNCH_TASKS", dict(fwd=0))),
    ("launch_tasks_response", "n2's RESPONSE_LAUNCH_TASKS to the inner srun", ("n1", "recv", "RESPONSE_LAUNCH_TASKS", {})),
    ("launch_prolog", "REQUEST_LAUNCH_PROLOG of job 1, to n1", ("ctld", "send", "REQUEST_LAUNCH_PROLOG", dict(fwd=0, job=1))),
    ("launch_prolog_2node", "REQUEST_LAUNCH_PROLOG of job 3, to n1 forward n2",
     ("ctld", "send", "REQUEST_LAUNCH_PROLOG", dict(fwd=1, job=3))),
    ("launch_prolog_2node_reply", "n1's aggregated RC (ret_list: n2)", "reply:launch_prolog_2node"),
    ("complete_prolog", "REQUEST_COMPLETE_PROLOG", ("ctld", "recv", "REQUEST_COMPLETE_PROLOG", {})),
    ("epilog_complete", "MESSAGE_EPILOG_COMPLETE", ("ctld", "recv", "MESSAGE_EPILOG_COMPLETE", {})),
    ("step_complete", "REQUEST_STEP_COMPLETE of job 1's step, from a 24.11 slurmstepd",
     ("ctld", "recv", "REQUEST_STEP_COMPLETE", dict(job=1))),
    ("srun_job_complete", "SRUN_JOB_COMPLETE to srun", ("ctld", "send", "SRUN_JOB_COMPLETE", {})),
    ("terminate_job", "REQUEST_TERMINATE_JOB of job 1, to n1", ("ctld", "send", "REQUEST_TERMINATE_JOB", dict(fwd=0, job=1))),
    ("terminate_job_2node", "REQUEST_TERMINATE_JOB of job 3, to n1 forward n2",
     ("ctld", "send", "REQUEST_TERMINATE_JOB", dict(fwd=1, job=3))),
    ("terminate_job_2node_reply", "n1's aggregated RC (ret_list: n2)", "reply:terminate_job_2node"),
    ("terminate_job_cancelled", "scancel 4: REQUEST_TERMINATE_JOB", ("ctld", "send", "REQUEST_TERMINATE_JOB", dict(fwd=0, job=4))),
    ("complete_batch_script", "REQUEST_COMPLETE_BATCH_SCRIPT of job 3 (exit 3)",
     ("ctld", "recv", "REQUEST_COMPLETE_BATCH_SCRIPT", dict(job=3))),
]


def main():
    kind, out, dest = sys.argv[1], sys.argv[2], sys.argv[3]
    rules = {"session": SESSION, "cross": CROSS}[kind]
    frames = load(out)
    unique = [f for f in frames if not f.dup]
    sent = [f.ver for f in unique if f.who == "ctld" and f.dir == "send" and f.type.startswith("REQUEST_")]
    version = max(set(sent), key=sent.count)  # what slurmctld speaks to the nodes
    min_version = min(f.ver for f in unique if f.who.startswith("ctld") and f.type == "REQUEST_NODE_REGISTRATION_STATUS")
    sel = Selector(frames, version, min_version)
    os.makedirs(dest, exist_ok=True)
    rows, missing, bad = [], [], 0
    for name, what, how in rules:
        optional = name.startswith("?")
        name = name.lstrip("?")
        if isinstance(how, str):
            req = sel.picked.get(how.split(":", 1)[1])
            f = sel.reply(req) if req else None
        else:
            f = None
            for who, d, types, kw in (how if isinstance(how, list) else [how]):
                f = f or sel.pick(who, d, types, **kw)
        if f is None:
            missing.append(name)
            if not optional:
                sys.stderr.write("select: no frame for %s\n" % name)
                bad += 1
            continue
        sel.picked[name] = f
        target = "%s_v%s.bin" % (name, f.ver)
        shutil.copyfile(f.path, os.path.join(dest, target))
        extra = []
        base = f.path[:-4]
        if os.path.exists(base + ".cred-payload.bin"):
            shutil.copyfile(base + ".cred-payload.bin", os.path.join(dest, name + "_cred_payload.bin"))
            extra.append("`%s_cred_payload.bin`: the job credential's signed bytes (%s)" % (
                name, "unmunge -o" if f.auth == 101 else "the JWT's payload claim"))
        if os.path.exists(base + ".cred-claims.json"):
            shutil.copyfile(base + ".cred-claims.json", os.path.join(dest, name + "_cred_claims.json"))
            extra.append("`%s_cred_claims.json`: its claims" % name)
        shape = "flags 0x%04x" % f.flags if f.type != "IO_INIT_MSG" else "%d bytes" % (f.body + 4)
        if f.fwd:
            shape += ", forward %s" % f.fwd_nodes
        if f.ret:
            shape += ", ret_list %d" % f.ret
        if f.type != "IO_INIT_MSG":
            shape += ", no auth" if f.auth == 0 else ", auth %d" % f.auth
            shape += ", body %d" % f.body
        rows.append("| %s | %s | %s (%s)%s |" % (target, f.name[:-4], what, shape,
                                                 "; " + "; ".join(extra) if extra else ""))
    print("| file | captured as | what |")
    print("|---|---|---|")
    print("\n".join(rows))
    if missing:
        print("\nOptional rules that matched nothing in this run (the other release's or auth's variant, "
              "or a reply the node never sends): %s." % ", ".join(missing))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
