// Package image builds the container images of slurmd-go and of the test
// cluster's pause sandbox from files of this host, with no registry and no
// container engine: a one-layer image written as a docker-archive tar that
// `ctr images import` loads. go-containerregistry does the image format;
// this package only says which files go in.
package image
