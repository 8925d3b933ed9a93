package auth_test

import (
	"crypto/hmac"
	"crypto/sha256"
)

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
