#!/usr/bin/env bash
# Captures the MESSAGE_NODE_REGISTRATION_STATUS frame a stock slurmd of each
# release sends at start with a gres.conf (pkg/gres/testdata/stock/CASE,
# default typed_shard_t1: typed gpu with Cores and Links, shard, mps), as it
# crossed the socket: slurmctld's address is a small listener that keeps
# every frame it is sent (no slurmctld needed for the first registration).
# Munge is a throw-away munged (/tmp/golden-munge, as capture.sh), the
# File= devices /tmp/tiee-gres-dev/nvN (pkg/gres/testdata/stock/capture.sh
# makes them). Root; 24.11 and 26.05 run in the scripts/chroots.sh chroots.
#
#   capture_gres.sh PORT [CASE]    PORT: the listener's; slurmd on PORT+1
#
# Output: testdata/reg_status_gres_v2600.bin, r2411/munge/reg_status_gres_v2a00.bin,
# r2605/munge/reg_status_gres_v2d00.bin.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TD=$(cd "$HERE/.." && pwd)
REPO=$(cd "$HERE/../../../../.." && pwd)
CHROOTS=${TIEE_CHROOT_DIR:-/var/lib/tiee/chroots}
PORT=${1:?usage: capture_gres.sh PORT [CASE]}
CASE=${2:-typed_shard_t1}
SRC=$REPO/slurmd-go/pkg/gres/testdata/stock/$CASE
MUNGE_DIR=/tmp/golden-munge
MUNGE_SOCK=$MUNGE_DIR/munge.socket
FRAME_TIMEOUT=60 # seconds for slurmd to start and send its registration

log() { printf '%s capture_gres: %s\n' "$(date +%T)" "$*" >&2; }

ensure_munged() {
  if [ -S $MUNGE_SOCK ] && munge -S $MUNGE_SOCK -n | unmunge -S $MUNGE_SOCK >/dev/null 2>&1; then
    return
  fi
  mkdir -p $MUNGE_DIR
  [ -s $MUNGE_DIR/munge.key ] || dd if=/dev/urandom of=$MUNGE_DIR/munge.key bs=1024 count=1 status=none
  chown munge:munge $MUNGE_DIR $MUNGE_DIR/munge.key
  chmod 0400 $MUNGE_DIR/munge.key
  runuser -u munge -- /usr/sbin/munged --socket=$MUNGE_SOCK --key-file=$MUNGE_DIR/munge.key \
    --pid-file=$MUNGE_DIR/munged.pid --log-file=$MUNGE_DIR/munged.log --seed-file=$MUNGE_DIR/munged.seed
  for _ in $(seq 1 20); do munge -S $MUNGE_SOCK -n | unmunge -S $MUNGE_SOCK >/dev/null 2>&1 && return; sleep 0.5; done
  log "munged did not come up"; exit 1
}

"$REPO/slurmd-go/pkg/gres/testdata/stock/capture.sh" "$CASE" >/dev/null # the devices
ensure_munged
for rel in 22.05 24.11 26.05; do
  case $rel in
    22.05) root=/ out=$TD/reg_status_gres_v2600.bin ;;
    24.11) root=$CHROOTS/24.11 out=$TD/r2411/munge/reg_status_gres_v2a00.bin ;;
    26.05) root=$CHROOTS/26.05 out=$TD/r2605/munge/reg_status_gres_v2d00.bin ;;
  esac
  d=/tmp/golden-gres-$rel
  rm -rf "$d"; mkdir -p "$d/spool" "$d/frames"
  cp "$SRC"/*.conf "$d/"
  "$REPO/slurmd-go/pkg/gres/testdata/slurm.conf.sh" "$d" |
    sed -e "s/^SlurmctldPort=.*/SlurmctldPort=$PORT/" -e "s/^SlurmdPort=.*/SlurmdPort=$((PORT + 1))/" \
        -e "s|^AuthType=auth/munge|AuthType=auth/munge\nAuthInfo=socket=$MUNGE_SOCK|" > "$d/slurm.conf"
  # The listener: every frame of every connection into frames/, then the
  # first registration (msg_type 1002) into reg.bin.
  python3 - "$PORT" "$d" "$FRAME_TIMEOUT" <<'PY' &
import socket, struct, sys, time
port, d, limit = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(8); s.settimeout(1.0)
deadline, n = time.time() + limit, 0
def readn(c, k):
    b = b""
    while len(b) < k:
        x = c.recv(k - len(b))
        if not x:
            raise EOFError
        b += x
    return b
while time.time() < deadline:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    c.settimeout(10)
    try:
        hdr = readn(c, 4)
        frame = hdr + readn(c, struct.unpack(">I", hdr)[0])
    except Exception:
        c.close(); continue
    n += 1
    open(f"{d}/frames/{n}.bin", "wb").write(frame)
    c.close()
    if struct.unpack(">H", frame[8:10])[0] == 1002:
        open(f"{d}/reg.bin", "wb").write(frame)
        sys.exit(0)
sys.exit(1)
PY
  lp=$!
  chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin slurmd -D -N t1 -f "$d/slurm.conf" >"$d/slurmd.out" 2>&1 &
  sp=$!
  rc=0; wait $lp || rc=$?
  kill $sp 2>/dev/null || true; wait $sp 2>/dev/null || true
  [ $rc = 0 ] && [ -s "$d/reg.bin" ] || { log "$rel: no registration frame ($(ls "$d/frames" | wc -l) frames); slurmd said:"; tail -20 "$d/slurmd.out" >&2; exit 1; }
  cp "$d/reg.bin" "$out"
  log "$rel: $(stat -c %s "$out") bytes -> ${out#$REPO/}"
done
