package activities

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestStaleBuildDirsAreSwept(t *testing.T) {
	dir := t.TempDir()
	old, fresh, other := filepath.Join(dir, "build-aaaa-1"), filepath.Join(dir, "build-bbbb-2"), filepath.Join(dir, "images")
	for _, d := range []string{old, fresh, other} {
		if err := os.MkdirAll(filepath.Join(d, "src"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, long, long)
	os.Chtimes(other, long, long)
	c := &BuildConfig{Dir: dir}
	if n := c.SweepStaleBuildDirs(time.Hour); n != 1 {
		t.Errorf("swept %d dirs, want 1", n)
	}
	for d, want := range map[string]bool{old: false, fresh: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", d, err == nil, want)
		}
	}
}
