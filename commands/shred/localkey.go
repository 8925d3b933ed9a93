package shred

import (
	"encoding/base64"
	"errors"
)

// decodeLocalKey reads a 32-byte key written in standard or URL base64 and returns it in URL
// base64, as base64key:// URLs want it.
func decodeLocalKey(key string) (string, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(key); err == nil {
			if len(b) != 32 {
				return "", errors.New("shred.local_key: want 32 bytes in base64")
			}
			return base64.URLEncoding.EncodeToString(b), nil
		}
	}
	return "", errors.New("shred.local_key: not base64")
}
