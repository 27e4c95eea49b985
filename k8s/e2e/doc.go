// Package e2e holds the tests of the chart on a real Kubernetes
// (k8s/realcluster/up.sh: etcd, kube-apiserver, controller-manager,
// scheduler, containerd, runc, kubelet) beside a real slurmctld: build tag
// integration, run by `make k8s-test` as root.
package e2e
