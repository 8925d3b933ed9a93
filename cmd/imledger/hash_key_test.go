package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
)

// TestServeRefusesRealBrokersWithoutAHashKey: with Kafka brokers configured and no
// verify.hash_key, serve exits at start naming the key, instead of running with verification
// codes off.
func TestServeRefusesRealBrokersWithoutAHashKey(t *testing.T) {
	// every setting but the key
	refusedAtStart(t, "verify: {code_length: 6}", "verify.hash_key: required when Kafka brokers are configured")
}

// TestServeRefusesRealBrokersWithoutAShredKey: with Kafka brokers configured and neither
// shred.keeper_url nor shred.local_key, serve exits at start naming the key, instead of wrapping
// data keys with a key no other node has.
func TestServeRefusesRealBrokersWithoutAShredKey(t *testing.T) {
	refusedAtStart(t, "shred: {enabled: true}", "shred.local_key: required when Kafka brokers are configured")
}

// refusedAtStart runs serve against real brokers with extra configuration and wants it to exit
// at start with an error holding want.
func refusedAtStart(t *testing.T, extra, want string) {
	t.Helper()
	env := newServeEnv(t, testenv.Kafka(t), true)
	env.extra = extra
	root := newRootCmd()
	logs := &syncBuffer{}
	root.SetOut(&syncBuffer{})
	root.SetErr(logs)
	root.SetArgs([]string{"serve", "--config", env.config(t, "refused", freeAddr(t))})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("serve with %s: %v, want it refused with %q\n%s", extra, err, want, logs.String())
	}
}
