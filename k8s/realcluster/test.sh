#!/usr/bin/env bash
# The chart's tests on a real Kubernetes: builds the Kubernetes binaries
# (build.sh), starts the cluster (up.sh), runs k8s/e2e against it beside a
# real slurmctld, and always tears the cluster down. Log:
# bin/logs/k8s-e2e.log. Root, as every real-cluster test.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export K8S_DIR=${K8S_DIR:-/var/lib/tiee/k8s}
k8s/realcluster/build.sh
trap 'k8s/realcluster/down.sh --purge' EXIT
k8s/realcluster/up.sh >/dev/null
export KUBECONFIG=$K8S_DIR/admin.kubeconfig TIEE_K8S_BIN=$root/bin/k8s
export TIEE_K8S_CONTAINERD=/run/tiee-k8s/containerd/containerd.sock
mkdir -p bin/logs
set -o pipefail
${GO:-go} test -tags integration -count=1 -v -timeout "${K8S_TEST_TIMEOUT:-20m}" ./k8s/e2e/ 2>&1 | tee bin/logs/k8s-e2e.log
