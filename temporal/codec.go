package temporal

import (
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

// Encode encrypts each payload, whole (its metadata included).
func (c Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
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

// Decode decrypts what Encode encrypted and passes anything else through.
func (c Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != encodingEncrypted {
			out[i] = p
			continue
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

// DataConverter is the SDK's default converter with payloads encrypted by keys (nil: none).
func DataConverter(keys Sealer) converter.DataConverter {
	if keys == nil {
		return converter.GetDefaultDataConverter()
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), Codec{Keys: keys})
}
