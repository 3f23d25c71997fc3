package activities

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

func TestTheBuildCacheKeepsImagesByWhatDecidesThem(t *testing.T) {
	cache := &BuildCache{Dir: t.TempDir(), Max: 2}
	cfg := &BuildConfig{GOPROXY: "off"}
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	job := func(ref string, opts models.BuildOptions) buildJob {
		work := t.TempDir()
		return buildJob{build: &models.Build{Options: opts}, src: src, index: index(t, src), work: work, ref: ref, imagePath: filepath.Join(work, "image.oci.tar")}
	}
	first := job("env:1", models.BuildOptions{EntryFolder: "."})
	key, err := cache.cacheKey(t.Context(), cfg, first)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cache.load(key, first); ok {
		t.Fatal("an empty cache had an entry")
	}
	img, _ := random.Image(1024, 2)
	digest, err := writeImage(img, first.ref, first.imagePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.store(key, img, cachedBuild{Digest: digest, Command: []string{"/app/env"}}); err != nil {
		t.Fatal(err)
	}

	// The same files, rewritten (other times), under another name: the same image, named anew.
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	second := job("env:2", models.BuildOptions{EntryFolder: ".", Source: "another client"})
	if k, _ := cache.cacheKey(t.Context(), cfg, second); k != key {
		t.Fatalf("the same source's key changed: %s, want %s", k, key)
	}
	got, ok := cache.load(key, second)
	if !ok || got.Digest != digest || !slices.Equal(got.Command, []string{"/app/env"}) {
		t.Fatalf("load = %+v, %v; want digest %s and its command", got, ok, digest)
	}
	if _, err := image.ReadArchive(second.imagePath, t.TempDir(), "env:2"); err != nil {
		t.Errorf("the loaded image is not named env:2: %v", err)
	}

	// What decides the image changes the key: the files, the options that reach the build, the
	// module proxy.
	for name, change := range map[string]func() (buildJob, *BuildConfig){
		"another file": func() (buildJob, *BuildConfig) {
			other := t.TempDir()
			os.WriteFile(filepath.Join(other, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
			os.WriteFile(filepath.Join(other, "more.go"), []byte("package main\n"), 0o644)
			j := job("e:1", first.build.Options)
			j.src, j.index = other, index(t, other)
			return j, cfg
		},
		"a link elsewhere": func() (buildJob, *BuildConfig) {
			other := t.TempDir()
			os.WriteFile(filepath.Join(other, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
			os.Symlink("main.go", filepath.Join(other, "link"))
			j := job("e:1", first.build.Options)
			j.src, j.index = other, index(t, other)
			k1, _ := cache.cacheKey(t.Context(), cfg, j)
			os.Remove(filepath.Join(other, "link"))
			os.Symlink("elsewhere.go", filepath.Join(other, "link"))
			if k2, _ := cache.cacheKey(t.Context(), cfg, j); k1 == k2 {
				t.Error("two links to different files give one key")
			}
			return j, cfg
		},
		"another entry folder": func() (buildJob, *BuildConfig) { return job("e:1", models.BuildOptions{EntryFolder: "cmd"}), cfg },
		"a build arg": func() (buildJob, *BuildConfig) {
			return job("e:1", models.BuildOptions{BuildArgs: map[string]string{"A": "1"}}), cfg
		},
		"another proxy": func() (buildJob, *BuildConfig) { return first, &BuildConfig{GOPROXY: "https://proxy.example"} },
	} {
		j, c := change()
		if k, err := cache.cacheKey(t.Context(), c, j); err != nil || k == key {
			t.Errorf("%s: key %s (%v), want another than %s", name, k, err, key)
		}
	}

	// Beyond Max entries the least recently used goes.
	for _, k := range []string{"b", "c"} {
		if err := cache.store(k, img, cachedBuild{Digest: digest}); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(cache.Dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"b", "c"}) {
		t.Errorf("entries after 3 stores into 2 = %q, want the 2 latest", names)
	}
}

// index lists dir as the build does (indexTree).
func index(t *testing.T, dir string) []registry.SourceEntry {
	t.Helper()
	entries, err := indexTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
