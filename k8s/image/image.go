package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one entry of the layer: a copy of host file Src, Data, a
// symbolic link to Link, or a directory.
type File struct {
	Path string // absolute, in the image
	Mode os.FileMode
	Src  string
	Data []byte
	Link string
	Dir  bool
}

// epoch stamps every entry and the config: the same inputs give the
// same image digest.
var epoch = time.Unix(0, 0).UTC()

// Layer is the tar of files, parents created as needed, in path order.
func Layer(files []File) (v1.Layer, error) {
	byPath := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("image: %q is not an absolute path", f.Path)
		}
		f.Path = path.Clean(f.Path)
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = File{Path: d, Dir: true, Mode: 0o755}
			}
		}
		byPath[f.Path] = f
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: int64(f.Mode.Perm()), ModTime: epoch, Format: tar.FormatPAX}
		if f.Mode&os.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		var body []byte
		switch {
		case f.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		case f.Src != "":
			b, err := os.ReadFile(f.Src)
			if err != nil {
				return nil, fmt.Errorf("image: %s: %w", p, err)
			}
			body = b
		default:
			body = f.Data
		}
		if !f.Dir && f.Link == "" {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: %s: %w", p, err)
		}
		if _, err := tw.Write(body); err != nil {
			return nil, fmt.Errorf("image: %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// Write writes a one-layer image of files with cfg, tagged tag
// ("localhost/tiee/slurmd-go:dev"), to out as a docker-archive tar.
func Write(out, tag string, files []File, cfg v1.Config) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image: tag %q: %w", tag, err)
	}
	layer, err := Layer(files)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Config = cfg
	cf.Architecture, cf.OS, cf.Created = runtime.GOARCH, "linux", v1.Time{Time: epoch}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("image: write %s: %w", out, err)
	}
	return os.Rename(tmp, out)
}
