package kube

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// push makes img pullable from the registry and returns the reference pods use (by digest).
func (p *Provider) push(ctx context.Context, img *sandbox.Image) (string, error) {
	p.mu.Lock()
	if ref, ok := p.pushed[img.Ref]; ok {
		p.mu.Unlock()
		return ref, nil
	}
	l := p.pushing[img.Ref]
	if l == nil {
		l = &sync.Mutex{}
		p.pushing[img.Ref] = l
	}
	p.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	p.mu.Lock()
	ref, ok := p.pushed[img.Ref]
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
	loaded, err := tarball.ImageFromPath(f.Name(), nil)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	digest, err := loaded.Digest()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	tag, err := name.NewTag(p.o.Registry + ":" + tagOf(img.Ref))
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
	p.pushed[img.Ref] = ref
	p.mu.Unlock()
	return ref, nil
}

var notTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// tagOf is a registry tag for an image ref: its own tag (a digest, for builds) when it has one.
func tagOf(ref string) string {
	t := ref
	if i := strings.LastIndex(ref, ":"); i >= 0 && !strings.Contains(ref[i:], "/") {
		t = ref[i+1:]
	}
	t = strings.Trim(notTagChars.ReplaceAllString(t, "-"), "-.")
	if len(t) > 128 {
		t = t[:128]
	}
	return cmp.Or(t, "latest")
}
