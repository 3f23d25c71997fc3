// Package secrets encrypts small values at rest (environment variables, member secrets, provider
// keys, build secrets) with envelope encryption from Tink: every value is sealed with a data key
// of its own (AES-256-GCM), and that data key is wrapped by the key-encryption keyset (the KEK)
// from configuration. A value is bound to the context it was written for (e.g. its row), so a
// ciphertext copied elsewhere does not decrypt.
//
// The KEK is a Tink keyset file (JSON, mode 0600). Rotating it adds a new primary key and keeps
// the old ones, so values written before still decrypt; Rewrap moves a value to the primary key.
// The KEK may instead be a Google Cloud KMS key (OpenKMS).
package secrets

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/tink-crypto/tink-go-gcpkms/v2/integration/gcpkms"
	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/insecurecleartextkeyset"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/tink"
	"google.golang.org/api/option"
)

// Errors callers branch on.
var (
	// ErrNoKey means the key file is missing: values cannot be written or read.
	ErrNoKey = errors.New("secrets: no key-encryption key")
	// ErrDecrypt means a value does not decrypt with this keyring: it was written under a key the
	// keyring does not hold (a lost or replaced key file), for another context, or was altered.
	ErrDecrypt = errors.New("secrets: the value cannot be decrypted with this key")
)

// Keyring seals and opens values with one KEK.
type Keyring struct {
	handle *keyset.Handle // nil when the KEK is in Cloud KMS
	kmsURI string
	env    tink.AEAD
}

// OpenKMS returns a keyring whose KEK lives in Google Cloud KMS: uri is
// "gcp-kms://projects/P/locations/L/keyRings/R/cryptoKeys/K", and each value's data key is
// wrapped by a KMS encrypt call (opened by a decrypt call). Rotating is KMS's: add a key version
// there, and Rewrap moves values to it. opts configure the KMS client (credentials, endpoint).
func OpenKMS(ctx context.Context, uri string, opts ...option.ClientOption) (*Keyring, error) {
	if !strings.HasPrefix(uri, "gcp-kms://") {
		return nil, fmt.Errorf("secrets KMS URI %q: want gcp-kms://projects/…/cryptoKeys/…", uri)
	}
	client, err := gcpkms.NewClientWithOptions(ctx, "gcp-kms://", opts...)
	if err != nil {
		return nil, fmt.Errorf("secrets KMS: %w", err)
	}
	kek, err := client.GetAEAD(uri)
	if err != nil {
		return nil, fmt.Errorf("secrets KMS key %s: %w", uri, err)
	}
	return &Keyring{kmsURI: uri, env: aead.NewKMSEnvelopeAEAD2(aead.AES256GCMKeyTemplate(), kek)}, nil
}

// Load reads the keyset at path. It refuses a file that other users may read.
func Load(path string) (*Keyring, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist (create one with `proctor admin keys create`)", ErrNoKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets key %s: mode %v lets other users read it: chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key %s: %w", path, err)
	}
	h, err := insecurecleartextkeyset.Read(keyset.NewJSONReader(bytes.NewReader(b)))
	if err != nil {
		return nil, fmt.Errorf("secrets key %s is not a Tink keyset: %w", path, err)
	}
	return fromHandle(h)
}

func fromHandle(h *keyset.Handle) (*Keyring, error) {
	kek, err := aead.New(h)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return &Keyring{handle: h, env: aead.NewKMSEnvelopeAEAD2(aead.AES256GCMKeyTemplate(), kek)}, nil
}

// Create writes a new keyset (one AES-256-GCM key) at path, which must not exist, with mode 0600.
func Create(path string) (*Keyring, error) {
	h, err := keyset.NewHandle(aead.AES256GCMKeyTemplate())
	if err != nil {
		return nil, err
	}
	if err := write(path, h, false); err != nil {
		return nil, err
	}
	return fromHandle(h)
}

// LoadOrCreate loads the keyset at path, creating it first when it does not exist (dev).
func LoadOrCreate(path string) (*Keyring, error) {
	k, err := Load(path)
	if errors.Is(err, ErrNoKey) {
		if k, err = Create(path); errors.Is(err, fs.ErrExist) {
			return Load(path) // created by a racing process
		}
	}
	return k, err
}

// Rotate adds a new key to the keyset at path and makes it the primary: new values are wrapped
// with it, and values written before still decrypt. It returns the new primary key's id.
func Rotate(path string) (uint32, error) {
	k, err := Load(path)
	if err != nil {
		return 0, err
	}
	m := keyset.NewManagerFromHandle(k.handle)
	id, err := m.Add(aead.AES256GCMKeyTemplate())
	if err != nil {
		return 0, err
	}
	if err := m.SetPrimary(id); err != nil {
		return 0, err
	}
	h, err := m.Handle()
	if err != nil {
		return 0, err
	}
	return id, write(path, h, true)
}

// write stores h at path with mode 0600: atomically replacing it when replace, else only when
// path does not exist.
func write(path string, h *keyset.Handle, replace bool) error {
	var buf bytes.Buffer
	if err := insecurecleartextkeyset.Write(h, keyset.NewJSONWriter(&buf)); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if !replace {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := f.Write(buf.Bytes()); err != nil {
			f.Close()
			os.Remove(path)
			return err
		}
		return f.Close()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keyset-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Primary is the id of the key new values are wrapped with (0 when the KEK is in KMS).
func (k *Keyring) Primary() uint32 {
	if k.handle == nil {
		return 0
	}
	return k.handle.KeysetInfo().GetPrimaryKeyId()
}

// InKMS says whether the KEK is in Cloud KMS (rotated there, not by Rotate).
func (k *Keyring) InKMS() bool { return k.kmsURI != "" }

// Encrypt seals plaintext for context (what the value is, e.g. "env-var:<registry>:<name>"):
// only Decrypt with the same context opens it.
func (k *Keyring) Encrypt(plaintext []byte, context string) ([]byte, error) {
	return k.env.Encrypt(plaintext, []byte(context))
}

// Decrypt opens a ciphertext Encrypt sealed for context.
func (k *Keyring) Decrypt(ciphertext []byte, context string) ([]byte, error) {
	pt, err := k.env.Decrypt(ciphertext, []byte(context))
	if err != nil {
		if k.InKMS() {
			return nil, fmt.Errorf("%w (with %s: %v)", ErrDecrypt, k.kmsURI, err)
		}
		return nil, fmt.Errorf("%w (key %d wrapped it)", ErrDecrypt, KeyID(ciphertext))
	}
	return pt, nil
}

// Rewrap re-seals ciphertext under the primary key when another key wrapped it (always, with a
// KMS KEK, whose versions it cannot see); changed says whether it did.
func (k *Keyring) Rewrap(ciphertext []byte, context string) (out []byte, changed bool, err error) {
	if !k.InKMS() && KeyID(ciphertext) == k.Primary() {
		return ciphertext, false, nil
	}
	pt, err := k.Decrypt(ciphertext, context)
	if err != nil {
		return nil, false, err
	}
	out, err = k.Encrypt(pt, context)
	return out, err == nil, err
}

// KeyID is the id of the KEK key that wrapped ciphertext's data key (0 when it cannot tell). An
// envelope is a 4-byte length, the wrapped data key (a Tink ciphertext: a version byte and the
// 4-byte key id first), then the payload.
func KeyID(ciphertext []byte) uint32 {
	if len(ciphertext) < 9 {
		return 0
	}
	return binary.BigEndian.Uint32(ciphertext[5:9])
}

// Mask is how every listing shows a secret value: its last four characters after a fixed
// run of dots when it is longer than 8 characters, else dots alone, so that short values give
// nothing away.
func Mask(value string) string {
	const dots = "••••••••"
	if utf8.RuneCountInString(value) <= 8 {
		return dots
	}
	r := []rune(value)
	return dots + string(r[len(r)-4:])
}
