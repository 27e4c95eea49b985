#!/usr/bin/env bash
# Stops what up.sh started and undoes its changes to the host: processes
# (pods and shims included: they outlive a killed kubelet and containerd),
# mounts, iptables chains, the service route, the bridge. --purge also
# removes $K8S_DIR. Safe to run when nothing is up.
set -uo pipefail
K=${K8S_DIR:-/var/lib/tiee/k8s}
STOP_TIMEOUT=${K8S_STOP_TIMEOUT:-20}

stop_pid() { # stop_pid PID: TERM, then KILL once STOP_TIMEOUT has passed
	local p=$1 start=$SECONDS
	kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || return 0
	# A zombie stays visible to kill -0 until PID 1 reaps it: read the state.
	while [ -e "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null; do
		if ((SECONDS - start > STOP_TIMEOUT)); then
			kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
			break
		fi
		sleep 0.2
	done
}
for name in kubelet kube-scheduler kube-controller-manager kube-apiserver; do
	[ -f "$K/run/$name.pid" ] && stop_pid "$(cat "$K/run/$name.pid")"
done
# Pods and their shims: the shims name our containerd socket.
for p in $(pgrep -f 'containerd-shim.*tiee-k8s' 2>/dev/null); do
	pkill -KILL -P "$p" 2>/dev/null
	kill -KILL "$p" 2>/dev/null
done
for f in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[ -d "$f" ] || continue
	find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null
done
for name in containerd etcd; do
	[ -f "$K/run/$name.pid" ] && stop_pid "$(cat "$K/run/$name.pid")"
done
rm -f "$K"/run/*.pid 2>/dev/null
# Mounts under the kubelet's root and containerd's state, deepest first.
awk -v k="$K" '$5 ~ "^"k"/|^/run/tiee-k8s" {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null
for f in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[ -d "$f" ] && find "$f" -depth -type d -exec rmdir {} + 2>/dev/null
done
iptables -t nat -D OUTPUT -j TIEE-K8S-SVC 2>/dev/null
iptables -t nat -F TIEE-K8S-SVC 2>/dev/null && iptables -t nat -X TIEE-K8S-SVC 2>/dev/null
# The kubelet's own chains.
for t in filter nat mangle; do
	for ch in $(iptables -t "$t" -S 2>/dev/null | awk '$1=="-N" && $2 ~ /^KUBE-/ {print $2}'); do
		for hook in INPUT OUTPUT FORWARD PREROUTING POSTROUTING; do
			while iptables -t "$t" -D "$hook" -j "$ch" 2>/dev/null; do :; done
		done
		iptables -t "$t" -F "$ch" 2>/dev/null
	done
	for ch in $(iptables -t "$t" -S 2>/dev/null | awk '$1=="-N" && $2 ~ /^KUBE-/ {print $2}'); do
		iptables -t "$t" -X "$ch" 2>/dev/null
	done
done
ip route del local 10.96.0.0/16 dev lo 2>/dev/null
ip link del tieek8s0 2>/dev/null
rm -rf /run/tiee-k8s
if [ "${1:-}" = --purge ]; then
	rm -rf "$K"
fi
exit 0
