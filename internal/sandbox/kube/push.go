package kube

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// push makes img pullable from the registry and returns the reference pods use (by digest).
// With the relay, what is pushed is img with one more layer, the relay at relayInImage (for
// a brought agent: see Options.Relay), under a tag of its own.
func (p *Provider) push(ctx context.Context, img *sandbox.Image, withRelay bool) (string, error) {
	key, suffix := img.Ref, ""
	if withRelay {
		key, suffix = img.Ref+" with the relay", "-relay"
	}
	p.mu.Lock()
	if ref, ok := p.pushed[key]; ok {
		p.mu.Unlock()
		return ref, nil
	}
	l := p.pushing[key]
	if l == nil {
		l = &sync.Mutex{}
		p.pushing[key] = l
	}
	p.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	p.mu.Lock()
	ref, ok := p.pushed[key]
	p.mu.Unlock()
	if ok {
		return ref, nil
	}
	f, err := os.CreateTemp("", "proctor-image-*.tar")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := img.Load(ctx, f); err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	var loaded v1.Image
	if loaded, err = tarball.ImageFromPath(f.Name(), nil); err == nil && withRelay {
		loaded, err = mutate.AppendLayers(loaded, p.relay)
	}
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	digest, err := loaded.Digest()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	tag, err := name.NewTag(p.o.Registry + ":" + tagOf(img.Ref, suffix))
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, p.o.RegistryOptions...)
	// Another worker may have pushed it already: the registry has the digest under the tag.
	if d, err := remote.Head(tag, opts...); err != nil || d.Digest != digest {
		if err := remote.Write(tag, loaded, opts...); err != nil {
			return "", fmt.Errorf("push image %s to %s: %w", img.Ref, tag, err)
		}
		p.log.Info("sandbox: pushed an image for the cluster", "image", img.Ref, "to", tag.String(), "digest", digest.String())
	}
	ref = tag.Context().Digest(digest.String()).String()
	p.mu.Lock()
	p.pushed[key] = ref
	p.mu.Unlock()
	return ref, nil
}

var notTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// tagOf is a registry tag for an image ref: its own tag (a digest, for builds) when it has one,
// and suffix.
func tagOf(ref, suffix string) string {
	t := ref
	if i := strings.LastIndex(ref, ":"); i >= 0 && !strings.Contains(ref[i:], "/") {
		t = ref[i+1:]
	}
	t = strings.Trim(notTagChars.ReplaceAllString(t, "-"), "-.")
	t = cmp.Or(t, "latest")
	if len(t)+len(suffix) > 128 {
		t = t[:128-len(suffix)]
	}
	return t + suffix
}

// relayLayer is a layer that holds the static relay binary at path as relayInImage.
func relayLayer(path string) (v1.Layer, error) {
	if err := sandbox.CheckStatic(path); err != nil {
		return nil, fmt.Errorf("agent relay %w", err)
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent relay: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir, file := strings.TrimPrefix(filepath.Dir(relayInImage), "/"), strings.TrimPrefix(relayInImage, "/")
	err = errors.Join(
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755}),
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: file, Mode: 0o755, Size: int64(len(bin))}))
	if err == nil {
		_, err = tw.Write(bin)
	}
	if err = errors.Join(err, tw.Close()); err != nil {
		return nil, fmt.Errorf("agent relay: %w", err)
	}
	layer := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer)), nil })
}
