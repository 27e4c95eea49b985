// Command mkimage writes an image as a docker-archive tar (k8s/image):
//
//	mkimage slurmd-go -bin bin -o bin/slurmd-go-image.tar
//	mkimage pause -bin bin/pause -o pause.tar
package main

import (
	"flag"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tiee-hpc/tiee/k8s/image"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mkimage slurmd-go|pause [-bin PATH] [-tag TAG] -o FILE")
		os.Exit(2)
	}
	kind := os.Args[1]
	fs := flag.NewFlagSet("mkimage "+kind, flag.ExitOnError)
	bin := fs.String("bin", "", "slurmd-go: the directory of slurmd-go and slurmstepd-go; pause: the pause binary")
	tag := fs.String("tag", "", "image reference (default localhost/tiee/<kind>:dev, pause: localhost/tiee/pause:1)")
	out := fs.String("o", "", "output tar")
	busybox := fs.String("busybox", "/bin/busybox", "a static busybox (Debian busybox-static)")
	fs.Parse(os.Args[2:])
	if *out == "" || *bin == "" {
		fs.Usage()
		os.Exit(2)
	}
	var files []image.File
	var cfg v1.Config
	var err error
	switch kind {
	case "slurmd-go":
		files, cfg, err = image.SlurmdGo(*bin, *busybox)
		if *tag == "" {
			*tag = "localhost/tiee/slurmd-go:dev"
		}
	case "pause":
		files, cfg = image.Pause(*bin)
		if *tag == "" {
			*tag = "localhost/tiee/pause:1"
		}
	default:
		err = fmt.Errorf("unknown image %q", kind)
	}
	if err == nil {
		err = image.Write(*out, *tag, files, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}
