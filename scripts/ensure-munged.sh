#!/usr/bin/env bash
# Start munged if it is not answering. Idempotent; used by make demo, make test and the test harness.
set -euo pipefail
if ! command -v munged >/dev/null; then
  echo "ensure-munged: munge is not installed (run scripts/install-deps.sh)" >&2
  exit 1
fi
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key 2>/dev/null || true
chmod 0400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
chmod 0755 /run/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  exit 0
fi
rm -f /run/munge/munged.pid
# munged outlives the caller: it must not inherit the caller's descriptors
# beyond 0-2. Under `flock /tmp/tiee-cluster.lock go test ...` one of them is
# the lock, which munged would then hold for everyone for as long as it runs.
for fd in /proc/$$/fd/*; do
  fd=${fd##*/}
  if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
done
if [ "$(id -u)" = 0 ] && id munge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged
else
  /usr/sbin/munged
fi
for _ in $(seq 1 50); do
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then exit 0; fi
  sleep 0.1
done
echo "ensure-munged: munged did not come up" >&2
exit 1
