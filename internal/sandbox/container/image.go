package container

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// ensureImage loads img into the engine unless the engine has it.
func (p *Provider) ensureImage(ctx context.Context, img *sandbox.Image) error {
	if _, err := p.cli.ImageInspect(ctx, img.Ref); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", img.Ref, err)
	}
	p.mu.Lock()
	l := p.loading[img.Ref]
	if l == nil {
		l = &sync.Mutex{}
		p.loading[img.Ref] = l
	}
	p.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	if _, err := p.cli.ImageInspect(ctx, img.Ref); err == nil {
		return nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.Load(ctx, pw)) }()
	res, err := p.cli.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("load image %s: %w", img.Ref, err)
	}
	defer res.Close()
	// The answer is a stream of JSON messages; an error arrives as one of them.
	dec := json.NewDecoder(bufio.NewReader(res))
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("load image %s: read the engine's answer: %w", img.Ref, err)
		}
		if m := cmp.Or(msg.ErrorDetail.Message, msg.Error); m != "" {
			return fmt.Errorf("load image %s: %s", img.Ref, m)
		}
	}
	pr.Close()
	if _, err := p.cli.ImageInspect(ctx, img.Ref); err != nil {
		return fmt.Errorf("image %s: loaded, yet the engine does not know it by that name: %w", img.Ref, err)
	}
	p.log.Info("sandbox: loaded an image into the container engine", "image", img.Ref)
	return nil
}
