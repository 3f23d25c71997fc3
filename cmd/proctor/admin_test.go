package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/secrets"
)

func TestAdminKeysCreateAndRotate(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys", "secrets.json")
	admin := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(t.Context(), append(append([]string{"admin"}, args...), "--data-dir", filepath.Join(dir, "data"), "--secrets-key-file", keyFile), &out, &errOut)
		return out.String() + errOut.String(), err
	}
	if out, err := admin("keys", "rotate"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("rotate without a key file: %v\n%s", err, out)
	}
	out, err := admin("keys", "create")
	if err != nil || !strings.Contains(out, "created "+keyFile) {
		t.Fatalf("keys create: %v\n%s", err, out)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v, want mode 0600", fi, err)
	}
	first, _ := secrets.Load(keyFile)
	if _, err := admin("keys", "create"); err == nil {
		t.Error("keys create replaced an existing key file")
	}
	out, err = admin("keys", "rotate")
	if err != nil || !strings.Contains(out, "new primary key") || !strings.Contains(out, "re-wrapped 0 stored secrets") {
		t.Fatalf("keys rotate: %v\n%s", err, out)
	}
	if k, _ := secrets.Load(keyFile); k.Primary() == first.Primary() {
		t.Error("the primary key did not change")
	}
	if out, err := admin("keys", "rewrap"); err != nil || !strings.Contains(out, "re-wrapped 0 stored secrets") {
		t.Errorf("keys rewrap: %v\n%s", err, out)
	}
}
