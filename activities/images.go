package activities

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/blob"
)

// TraceImageKey is where object storage keeps an image a tool result of the trace carried. The
// name is the image's digest, so a retried tool step writes the same object again, not another.
func TraceImageKey(traceID uuid.UUID, im agent.Image) string {
	return fmt.Sprintf("traces/%s/images/%s%s", traceID, im.SHA256, im.Extension())
}

// keepImages stores a tool result's images in object storage and returns them with their keys
// set, ready to be recorded in the trace (whose JSON leaves the bytes out). An image that cannot be
// stored is returned without a key: the model later reads a note in its place, and the worker
// log says why. Failing the step instead would make the call again on the retry, and tool calls
// change the environment.
func (a *Activities) keepImages(ctx context.Context, traceID uuid.UUID, images []agent.Image) []agent.Image {
	if len(images) == 0 {
		return nil
	}
	if a.Bucket == nil {
		a.workerLog(ctx, traceID, "a tool result's %d image(s) were not kept: this worker has no object storage (set --blob-url)", len(images))
		return images
	}
	out := make([]agent.Image, len(images))
	for i, im := range images {
		key := TraceImageKey(traceID, im)
		if err := a.Bucket.Put(ctx, key, bytes.NewReader(im.Data), im.MIMEType); err != nil {
			a.workerLog(ctx, traceID, "a tool result's image (%s, %d bytes) was not kept: %v", im.MIMEType, im.Size, err)
			out[i] = im
			continue
		}
		im.Key = key
		out[i] = im
		a.toolImages().add(key, im.Data)
	}
	return out
}

// withImages returns req with the bytes of its messages' stored images read back (from a cache
// of recent images, else object storage). req itself is left as it is: a conversation keeps keys,
// not bytes, so that a worker's memory holds each image once, in the bounded cache. An image
// whose object is gone is left without bytes (the model reads a note).
func (a *Activities) withImages(ctx context.Context, req agent.StepRequest) (agent.StepRequest, error) {
	if a.Bucket == nil {
		return req, nil
	}
	var msgs []agent.Message // a copy, once a message changes
	for i, m := range req.Messages {
		var imgs []agent.Image
		for j, im := range m.Images {
			if im.Key == "" || len(im.Data) > 0 {
				continue
			}
			data, err := a.imageBytes(ctx, im.Key)
			if errors.Is(err, blob.ErrNotFound) {
				continue
			}
			if err != nil {
				return req, fmt.Errorf("read the image %s: %w", im.Key, err)
			}
			if imgs == nil {
				imgs = slices.Clone(m.Images)
			}
			imgs[j].Data = data
		}
		if imgs != nil {
			if msgs == nil {
				msgs = slices.Clone(req.Messages)
			}
			msgs[i].Images = imgs
		}
	}
	if msgs != nil {
		req.Messages = msgs
	}
	return req, nil
}

func (a *Activities) imageBytes(ctx context.Context, key string) ([]byte, error) {
	if data, ok := a.toolImages().get(key); ok {
		return data, nil
	}
	r, err := a.Bucket.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	a.toolImages().add(key, data)
	return data, nil
}

// imageCacheBytes bounds the images a worker keeps in memory for the conversations it steps: a
// screenshot-driven try sends every earlier screenshot again with each step.
const imageCacheBytes = 256 << 20

// imageBytesCache is a least-recently-used cache of images by key, bounded in bytes.
type imageBytesCache struct {
	mu    sync.Mutex
	max   int
	size  int
	byKey map[string]*list.Element
	order *list.List // of *cachedImage, most recent first
}

type cachedImage struct {
	key  string
	data []byte
}

func (a *Activities) toolImages() *imageBytesCache {
	a.imgOnce.Do(func() {
		a.imgCache = &imageBytesCache{max: imageCacheBytes, byKey: map[string]*list.Element{}, order: list.New()}
	})
	return a.imgCache
}

func (c *imageBytesCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedImage).data, true
}

func (c *imageBytesCache) add(key string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok || len(data) > c.max {
		return
	}
	c.byKey[key] = c.order.PushFront(&cachedImage{key: key, data: data})
	c.size += len(data)
	for c.size > c.max {
		oldest := c.order.Back()
		ci := c.order.Remove(oldest).(*cachedImage)
		delete(c.byKey, ci.key)
		c.size -= len(ci.data)
	}
}
