package temporal

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/proctorhq/proctor/internal/secrets"
)

func TestTheCodecEncryptsPayloadsAndPassesOldOnesThrough(t *testing.T) {
	keys, err := secrets.Create(filepath.Join(t.TempDir(), "k.json"))
	if err != nil {
		t.Fatal(err)
	}
	plain := converter.GetDefaultDataConverter()
	dc := DataConverter(keys)
	in := map[string]string{"trace_id": "t-1", "note": "visible-marker"}
	p, err := dc.ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.GetData(), []byte("visible-marker")) || string(p.GetMetadata()[converter.MetadataEncoding]) != encodingEncrypted {
		t.Fatalf("an encoded payload shows its content: %s", p)
	}
	var out map[string]string
	if err := dc.FromPayload(p, &out); err != nil || out["note"] != "visible-marker" {
		t.Fatalf("decode = %v, %v", out, err)
	}
	// A payload written before the codec still reads.
	old, _ := plain.ToPayload(in)
	out = nil
	if err := dc.FromPayload(old, &out); err != nil || out["trace_id"] != "t-1" {
		t.Errorf("a plain payload through the codec = %v, %v", out, err)
	}
	// Without the key the ciphertext does not read; altered, it does not either.
	other, _ := secrets.Create(filepath.Join(t.TempDir(), "other.json"))
	if err := DataConverter(other).FromPayload(p, &out); err == nil {
		t.Error("another key decoded the payload")
	}
	p.Data[len(p.Data)-1] ^= 1
	if err := dc.FromPayload(p, &out); err == nil {
		t.Error("an altered payload decoded")
	}
	// A process without the key writes plain payloads and says why it cannot read encrypted ones.
	keyless := DataConverter(nil)
	if p, _ := keyless.ToPayload(in); string(p.GetMetadata()[converter.MetadataEncoding]) != "json/plain" {
		t.Errorf("without a key a payload is written as %s", p.GetMetadata()[converter.MetadataEncoding])
	}
	p, _ = dc.ToPayload(in)
	if err := keyless.FromPayload(p, &out); !errors.Is(err, ErrNoPayloadKey) {
		t.Errorf("a keyless process reading an encrypted payload: %v, want ErrNoPayloadKey", err)
	}
}
