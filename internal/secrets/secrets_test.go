package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestValuesSurviveRotationAndRewrap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "secrets.json")
	k1, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	old, err := k1.Encrypt([]byte("sk-live-1234"), "env-var:r1:API_KEY")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(old, []byte("sk-live")) {
		t.Fatal("the ciphertext holds the plaintext")
	}
	if KeyID(old) != k1.Primary() {
		t.Errorf("KeyID = %d, want the primary %d", KeyID(old), k1.Primary())
	}
	second, err := k1.Encrypt([]byte("sk-live-1234"), "env-var:r1:API_KEY")
	if err != nil || bytes.Equal(old, second) {
		t.Errorf("two encryptions of one value are equal (no fresh data key): %v", err)
	}

	id2, err := Rotate(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if k2.Primary() != id2 || id2 == k1.Primary() {
		t.Fatalf("after Rotate the primary is %d, want the new key %d", k2.Primary(), id2)
	}
	if pt, err := k2.Decrypt(old, "env-var:r1:API_KEY"); err != nil || string(pt) != "sk-live-1234" {
		t.Fatalf("a value written under key 1 after rotating: %q %v", pt, err)
	}
	re, changed, err := k2.Rewrap(old, "env-var:r1:API_KEY")
	if err != nil || !changed || KeyID(re) != id2 {
		t.Fatalf("Rewrap = key %d changed %v %v, want key %d", KeyID(re), changed, err, id2)
	}
	if _, changed, _ := k2.Rewrap(re, "env-var:r1:API_KEY"); changed {
		t.Error("Rewrap of a value already under the primary changed it")
	}
	if pt, err := k2.Decrypt(re, "env-var:r1:API_KEY"); err != nil || string(pt) != "sk-live-1234" {
		t.Errorf("the rewrapped value: %q %v", pt, err)
	}
	// The new value cannot be read with the old key file alone.
	if _, err := k1.Decrypt(re, "env-var:r1:API_KEY"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("the old keyring opened a value of the new key: %v", err)
	}
}

func TestAValueOpensOnlyForItsContextAndItsKey(t *testing.T) {
	dir := t.TempDir()
	k, _ := Create(filepath.Join(dir, "a.json"))
	other, _ := Create(filepath.Join(dir, "b.json"))
	ct, _ := k.Encrypt([]byte("v"), "member-secret:m1:TOKEN")
	if _, err := k.Decrypt(ct, "member-secret:m2:TOKEN"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("opened for another context: %v", err)
	}
	if _, err := other.Decrypt(ct, "member-secret:m1:TOKEN"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("opened with another key: %v", err)
	}
	ct[len(ct)-1] ^= 1
	if _, err := k.Decrypt(ct, "member-secret:m1:TOKEN"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("opened an altered value: %v", err)
	}
}

func TestAMissingOrExposedKeyIsAClearError(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "none.json")); !errors.Is(err, ErrNoKey) {
		t.Errorf("Load of a missing file = %v, want ErrNoKey", err)
	}
	path := filepath.Join(dir, "k.json")
	Create(path)
	os.Chmod(path, 0o644)
	if _, err := Load(path); err == nil {
		t.Error("Load accepted a key file other users may read")
	}
	os.Chmod(path, 0o600)
	if _, err := Create(path); err == nil {
		t.Error("Create overwrote an existing key")
	}
	os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{}"), 0o600)
	if _, err := Load(filepath.Join(dir, "junk.json")); err == nil {
		t.Error("Load accepted a file that is no keyset")
	}
	k, err := LoadOrCreate(filepath.Join(dir, "dev.json"))
	if err != nil || k == nil {
		t.Fatalf("LoadOrCreate: %v", err)
	}
	k2, err := LoadOrCreate(filepath.Join(dir, "dev.json"))
	if err != nil || k2.Primary() != k.Primary() {
		t.Errorf("LoadOrCreate made a second key: %v", err)
	}
}

func TestMask(t *testing.T) {
	for in, want := range map[string]string{"": "••••••••", "short": "••••••••", "12345678": "••••••••", "sk-abcdefgh1234": "••••••••1234", "ключ-секрет-ёжик": "••••••••ёжик"} {
		if got := Mask(in); got != want {
			t.Errorf("Mask(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkSealAndOpen: one 64-byte value sealed (a fresh data key, wrapped) and opened.
func BenchmarkSealAndOpen(b *testing.B) {
	k, err := Create(filepath.Join(b.TempDir(), "k.json"))
	if err != nil {
		b.Fatal(err)
	}
	v := bytes.Repeat([]byte("k"), 64)
	for b.Loop() {
		ct, err := k.Encrypt(v, "env-var:x")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.Decrypt(ct, "env-var:x"); err != nil {
			b.Fatal(err)
		}
	}
}
