#!/usr/bin/env bash
# Starts a real single-node Kubernetes on this host for the tests: etcd,
# kube-apiserver, controller-manager, scheduler, containerd + runc and a
# kubelet (node "127.0.0.1"), all on loopback, state under $K8S_DIR
# (default /var/lib/tiee/k8s). No registry: images are imported with
# `ctr images import`. down.sh undoes every change made to the host.
# Facts and gotchas: ../shared/reference/k8s-real-cluster.md.
# Prints `export KUBECONFIG=...` on success.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/k8s/realcluster
K=${K8S_DIR:-/var/lib/tiee/k8s}
bin=${K8S_BIN:-$root/bin/k8s}
# Named waits: every state is polled, none is slept for.
READY_TIMEOUT=${K8S_READY_TIMEOUT:-180}

for c in etcd containerd runc ctr iptables openssl; do
	command -v "$c" >/dev/null || { echo "up.sh: $c is missing: run scripts/install-deps.sh" >&2; exit 1; }
done
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
	[ -x "$bin/$c" ] || { echo "up.sh: $bin/$c is missing: run k8s/realcluster/build.sh" >&2; exit 1; }
done
"$here/down.sh" >/dev/null 2>&1 || true
mkdir -p "$K"/{pki,logs,etcd,containerd,cni/net.d,cni/ipam,kubelet,pods,run}
cd "$K"

log() { echo "up.sh: $*" >&2; }
# wait_for NAME SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
	local name=$1 t=$2 start=$SECONDS
	shift 2
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS - start > t)); then
			log "$name not ready after ${t}s; logs in $K/logs"
			tail -n 20 "$K"/logs/*.log >&2 || true
			return 1
		fi
		sleep 0.5
	done
	log "$name ready after $((SECONDS - start))s"
}
start() { # start NAME CMD...: a session leader, its pid in run/NAME.pid
	local name=$1
	shift
	setsid "$@" >"logs/$name.log" 2>&1 </dev/null &
	echo $! >"run/$name.pid"
}

# PKI: one CA for clients, serving certificates and the kubelet.
pki=$K/pki
if [ ! -f "$pki/ca.crt" ]; then
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=tiee-k8s-ca \
		-keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
	cert() { # cert NAME SUBJECT [SAN]
		local ext=()
		if [ -n "${3:-}" ]; then
			printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" >"$pki/$1.ext"
			ext=(-extfile "$pki/$1.ext")
		fi
		openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$pki/$1.key" -out "$pki/$1.csr" 2>/dev/null
		openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
			-days 3650 "${ext[@]}" -out "$pki/$1.crt" 2>/dev/null
	}
	cert apiserver /CN=kube-apiserver "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	cert admin "/O=system:masters/CN=admin"
	cert controller-manager /CN=system:kube-controller-manager
	cert scheduler /CN=system:kube-scheduler
	cert kubelet "/O=system:nodes/CN=system:node:127.0.0.1" "IP:127.0.0.1"
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi
kubeconfig() { # kubeconfig NAME: a kubeconfig with NAME's client certificate
	cat >"$K/$1.kubeconfig" <<EOC
apiVersion: v1
kind: Config
clusters:
- name: tiee
  cluster: {server: "https://127.0.0.1:16443", certificate-authority: "$pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$pki/$1.crt", client-key: "$pki/$1.key"}
contexts:
- name: tiee
  context: {cluster: tiee, user: $1}
current-context: tiee
EOC
}
for u in admin controller-manager scheduler kubelet; do kubeconfig $u; done
export KUBECONFIG=$K/admin.kubeconfig
kc() { "$bin/kubectl" --kubeconfig "$K/admin.kubeconfig" "$@"; }

start etcd etcd --name tiee --data-dir "$K/etcd" \
	--listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
	--listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
	--initial-cluster tiee=http://127.0.0.1:12380
wait_for etcd 60 curl -sf http://127.0.0.1:12379/health

start kube-apiserver "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:12379 \
	--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=16443 \
	--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--client-ca-file="$pki/ca.crt" --kubelet-certificate-authority="$pki/ca.crt" \
	--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
	--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
	--endpoint-reconciler-type=none --service-cluster-ip-range=10.96.0.0/16 \
	--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$pki/sa.pub" \
	--service-account-signing-key-file="$pki/sa.key" --allow-privileged=true
wait_for kube-apiserver "$READY_TIMEOUT" kc get --raw /readyz

start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$K/controller-manager.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port=16257 --leader-elect=false \
	--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
	--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
	--use-service-account-credentials=true
start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$K/scheduler.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port=16259 --leader-elect=false

# containerd with its own root, state and socket; restrict_oom_score_adj
# because this host's root lacks CAP_SYS_RESOURCE (gotcha 1).
sock=/run/tiee-k8s/containerd/containerd.sock
cat >"$K/containerd/config.toml" <<EOC
version = 2
root = "$K/containerd/root"
state = "/run/tiee-k8s/containerd/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/tiee/pause:1"
  stream_server_address = "127.0.0.1"
  stream_server_port = "16010"
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$K/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
      Root = "/run/tiee-k8s/runc"
EOC
cat >"$K/cni/net.d/10-tiee.conflist" <<EOC
{"cniVersion": "1.0.0", "name": "tiee", "plugins": [{"type": "bridge", "bridge": "tieek8s0",
 "isGateway": true, "ipMasq": false,
 "ipam": {"type": "host-local", "dataDir": "$K/cni/ipam", "ranges": [[{"subnet": "10.244.0.0/24"}]],
          "routes": [{"dst": "10.96.0.0/16"}]}}]}
EOC
mkdir -p /run/tiee-k8s/containerd
start containerd containerd --config "$K/containerd/config.toml"
wait_for containerd 60 ctr --address "$sock" version
"$root/bin/mkimage" pause -bin "$root/bin/pause" -o "$K/pause.tar"
ctr --address "$sock" -n k8s.io images import "$K/pause.tar" >/dev/null

# The kubernetes Service VIP: no kube-proxy here, so 10.96.0.1:443 is
# DNATed to the apiserver for in-cluster clients (gotcha 8).
ip route replace local 10.96.0.0/16 dev lo
iptables -t nat -N TIEE-K8S-SVC 2>/dev/null || iptables -t nat -F TIEE-K8S-SVC
iptables -t nat -A TIEE-K8S-SVC -d 10.96.0.1/32 -p tcp --dport 443 -j DNAT --to-destination 127.0.0.1:16443
iptables -t nat -C OUTPUT -j TIEE-K8S-SVC 2>/dev/null || iptables -t nat -A OUTPUT -j TIEE-K8S-SVC

cat >"$K/kubelet-config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 16250
healthzBindAddress: 127.0.0.1
healthzPort: 16248
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$pki/kubelet.crt"
tlsPrivateKeyFile: "$pki/kubelet.key"
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podLogsDir: "$K/pods"
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"}
containerRuntimeEndpoint: "unix://$sock"
EOC
start kubelet "$bin/kubelet" --config="$K/kubelet-config.yaml" --kubeconfig="$K/kubelet.kubeconfig" \
	--hostname-override=127.0.0.1 --root-dir="$K/kubelet" --cert-dir="$K/pki"
node_ready() { kc get node 127.0.0.1 -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' | grep -qx True; }
wait_for "node 127.0.0.1" "$READY_TIMEOUT" node_ready
wait_for "default ServiceAccount" "$READY_TIMEOUT" kc -n default get serviceaccount default
wait_for kube-root-ca.crt "$READY_TIMEOUT" kc -n default get configmap kube-root-ca.crt
echo "export KUBECONFIG=$K/admin.kubeconfig"
