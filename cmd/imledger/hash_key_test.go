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
	env := newServeEnv(t, testenv.Kafka(t), true)
	env.extra = "verify: {code_length: 6}" // every setting but the key
	root := newRootCmd()
	logs := &syncBuffer{}
	root.SetOut(&syncBuffer{})
	root.SetErr(logs)
	root.SetArgs([]string{"serve", "--config", env.config(t, "nokey", freeAddr(t))})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "verify.hash_key: required when Kafka brokers are configured") {
		t.Fatalf("serve without verify.hash_key: %v, want it refused naming the key\n%s", err, logs.String())
	}
}

// TestServeRefusesRealBrokersWithoutAShredKey: with Kafka brokers configured and neither
// shred.keeper_url nor shred.local_key, serve exits at start naming the key, instead of wrapping
// data keys with a key no other node has.
func TestServeRefusesRealBrokersWithoutAShredKey(t *testing.T) {
	env := newServeEnv(t, testenv.Kafka(t), true)
	env.extra = "shred: {enabled: true}" // every setting but the key
	root := newRootCmd()
	logs := &syncBuffer{}
	root.SetOut(&syncBuffer{})
	root.SetErr(logs)
	root.SetArgs([]string{"serve", "--config", env.config(t, "noshred", freeAddr(t))})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "shred.local_key: required when Kafka brokers are configured") {
		t.Fatalf("serve without a shred key: %v, want it refused naming the key\n%s", err, logs.String())
	}
}
