package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/api/option"
)

// fakeKMS serves the two Cloud KMS REST calls a KMS-wrapped keyring makes (encrypt, decrypt) for
// one key, with an AES-GCM key of its own: Cloud KMS cannot be reached from here.
func fakeKMS(t *testing.T, keyName string) (*httptest.Server, *atomic.Int64) {
	key := make([]byte, 32)
	rand.Read(key)
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	crc := func(b []byte) int64 { return int64(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))) }
	dec := func(s string) []byte {
		b, err := base64.URLEncoding.DecodeString(s)
		if err != nil {
			b, _ = base64.StdEncoding.DecodeString(s)
		}
		return b
	}
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		name, op, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/"), ":")
		if name != keyName {
			http.Error(w, `{"error":{"code":404,"message":"no such key"}}`, http.StatusNotFound)
			return
		}
		var req struct {
			Plaintext, Ciphertext, AdditionalAuthenticatedData string
		}
		json.NewDecoder(r.Body).Decode(&req)
		aad := dec(req.AdditionalAuthenticatedData)
		w.Header().Set("Content-Type", "application/json")
		switch op {
		case "encrypt":
			pt := dec(req.Plaintext)
			nonce := make([]byte, gcm.NonceSize())
			rand.Read(nonce)
			ct := gcm.Seal(nonce, nonce, pt, aad)
			json.NewEncoder(w).Encode(map[string]any{"name": keyName + "/cryptoKeyVersions/1", "ciphertext": base64.StdEncoding.EncodeToString(ct),
				"ciphertextCrc32c": fmt.Sprint(crc(ct)), "verifiedPlaintextCrc32c": true, "verifiedAdditionalAuthenticatedDataCrc32c": true})
		case "decrypt":
			ct := dec(req.Ciphertext)
			if len(ct) < gcm.NonceSize() {
				http.Error(w, `{"error":{"code":400,"message":"bad ciphertext"}}`, http.StatusBadRequest)
				return
			}
			pt, err := gcm.Open(nil, ct[:gcm.NonceSize()], ct[gcm.NonceSize():], aad)
			if err != nil {
				http.Error(w, `{"error":{"code":400,"message":"decryption failed"}}`, http.StatusBadRequest)
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"plaintext": base64.StdEncoding.EncodeToString(pt), "plaintextCrc32c": fmt.Sprint(crc(pt))})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestAKMSKeyWrapsTheDataKeys(t *testing.T) {
	const keyName = "projects/p/locations/global/keyRings/proctor/cryptoKeys/secrets"
	srv, calls := fakeKMS(t, keyName)
	opts := []option.ClientOption{option.WithEndpoint(srv.URL + "/"), option.WithoutAuthentication(), option.WithHTTPClient(srv.Client())}
	k, err := OpenKMS(t.Context(), "gcp-kms://"+keyName, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if !k.InKMS() || k.Primary() != 0 {
		t.Errorf("InKMS %v, Primary %d", k.InKMS(), k.Primary())
	}
	ct, err := k.Encrypt([]byte("sk-live-1"), "env-var:1")
	if err != nil || calls.Load() != 1 {
		t.Fatalf("Encrypt: %v after %d KMS calls, want one (the data key's wrap)", err, calls.Load())
	}
	if pt, err := k.Decrypt(ct, "env-var:1"); err != nil || string(pt) != "sk-live-1" || calls.Load() != 2 {
		t.Fatalf("Decrypt = %q, %v after %d KMS calls", pt, err, calls.Load())
	}
	if _, err := k.Decrypt(ct, "env-var:2"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("opened for another context: %v", err)
	}
	re, changed, err := k.Rewrap(ct, "env-var:1")
	if err != nil || !changed {
		t.Fatalf("Rewrap under KMS = %v, %v; want a fresh wrap", changed, err)
	}
	if pt, _ := k.Decrypt(re, "env-var:1"); string(pt) != "sk-live-1" {
		t.Errorf("the rewrapped value opens to %q", pt)
	}
	other, _ := OpenKMS(t.Context(), "gcp-kms://projects/p/locations/global/keyRings/proctor/cryptoKeys/other", opts...)
	if _, err := other.Decrypt(ct, "env-var:1"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("another KMS key opened the value: %v", err)
	}
	if _, err := OpenKMS(t.Context(), "aws-kms://x", opts...); err == nil {
		t.Error("OpenKMS took a URI that is not gcp-kms://")
	}
}
