#!/usr/bin/env bash
# Builds the test cluster's Kubernetes binaries into $OUT (default
# bin/k8s): kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
# and kubectl of the release pinned in k8s/realcluster/build/go.mod, and
# helm (k8s/realcluster/helm/go.mod), from the module proxy. About 10 minutes of 2 cores from a cold build cache;
# seconds when the binaries are newer than go.mod.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/bin/k8s}
mod=$root/k8s/realcluster/build
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
ver=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$mod/go.mod")
[ -n "$ver" ] || { echo "build.sh: no k8s.io/kubernetes version in $mod/go.mod" >&2; exit 1; }
mkdir -p "$out"
helmmod=$root/k8s/realcluster/helm
if ! [ "$out/helm" -nt "$helmmod/go.mod" ]; then
	echo "build.sh: building helm into $out"
	(cd "$helmmod" && GOFLAGS="-trimpath -mod=mod" CGO_ENABLED=0 ${GO:-go} build -ldflags="-s -w" -o "$out/helm" helm.sh/helm/v4/cmd/helm)
	touch "$out/helm"
fi
fresh=1
for c in "${cmds[@]}"; do
	[ "$out/$c" -nt "$mod/go.mod" ] || fresh=0
done
if [ "$fresh" = 1 ]; then
	echo "build.sh: $out holds Kubernetes $ver"
	exit 0
fi
# The version stamp: without it every binary, and the node's kubeletVersion,
# says v0.0.0-master.
x="-X k8s.io/component-base/version.gitVersion=$ver -X k8s.io/client-go/pkg/version.gitVersion=$ver"
x="$x -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$ver" | cut -d. -f2)"
pkgs=()
for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
echo "build.sh: building Kubernetes $ver into $out (about 10 minutes from a cold cache)"
cd "$mod"
GOFLAGS="-trimpath -mod=mod" CGO_ENABLED=0 ${GO:-go} build -ldflags="-s -w $x" -o "$out/" "${pkgs[@]}"
touch "${cmds[@]/#/$out/}"
echo "build.sh: done"
