// Package k8snode watches the daemon's own Kubernetes Node (the name
// comes from the downward API) with a client-go informer and hands each
// new label set to the daemon. It is the only daemon package that imports
// client-go; what the labels mean is k8stopo's.
package k8snode
