package temporal

import (
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Sealer encrypts and decrypts (internal/secrets.Keyring is one).
type Sealer interface {
	Encrypt(plaintext []byte, context string) ([]byte, error)
	Decrypt(ciphertext []byte, context string) ([]byte, error)
}

// Metadata of an encrypted payload.
const (
	encodingEncrypted = "binary/proctor-encrypted"
	payloadContext    = "temporal-payload"
)

// Codec encrypts every payload Temporal stores (workflow and activity inputs and results,
// signals, memos) with the secrets key, so that histories at rest hold only ciphertext. Payloads
// it did not encrypt pass through, so a history written before the codec stays readable.
type Codec struct{ Keys Sealer }

var _ converter.PayloadCodec = Codec{}

// Encode encrypts each payload, whole (its metadata included); without keys it leaves them.
func (c Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.Keys == nil {
		return payloads, nil
	}
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		b, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		ct, err := c.Keys.Encrypt(b, payloadContext)
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encodingEncrypted)}, Data: ct}
	}
	return out, nil
}

// ErrNoPayloadKey is why a process without the secrets key cannot read an encrypted payload.
var ErrNoPayloadKey = errors.New("this payload is encrypted with the secrets key, and this process has none: " +
	"give every server and worker the same key (PROCTOR_SECRETS_KEY_FILE or PROCTOR_SECRETS_KMS_URI)")

// Decode decrypts what Encode encrypted and passes anything else through.
func (c Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != encodingEncrypted {
			out[i] = p
			continue
		}
		if c.Keys == nil {
			return nil, ErrNoPayloadKey
		}
		b, err := c.Keys.Decrypt(p.GetData(), payloadContext)
		if err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(b, &dec); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
		out[i] = &dec
	}
	return out, nil
}

// DataConverter is the SDK's default converter with payloads encrypted by keys. Without keys
// (nil) payloads are written plain, and an encrypted one fails with ErrNoPayloadKey rather than
// the SDK's "encoding not supported".
func DataConverter(keys Sealer) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), Codec{Keys: keys})
}
