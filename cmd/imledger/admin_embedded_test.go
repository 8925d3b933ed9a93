package main

import (
	"strings"
	"testing"
)

// TestUnsignedAdminCommandOnTheEmbeddedBroker: with the embedded broker and the default
// admin.allow_unsigned, `imledger admin send` without a key is answered succeeded, as the quick
// start shows; the node had pointed kafka.brokers at its own broker, which must not count as
// real brokers.
func TestUnsignedAdminCommandOnTheEmbeddedBroker(t *testing.T) {
	env := newServeEnv(t, nil, true)
	env.embeddedAddr, env.noAdminKeys = freeAddr(t), true
	s := env.start(t, "solo")
	out, errOut, err := runCLI(t, "admin", "send", "--config", s.file, "--type", "tenant.config_set", "--tenant", "demo",
		"--payload", `{"settings":{"registration_open":true}}`)
	if err != nil || !strings.Contains(out, `"status": "succeeded"`) {
		t.Fatalf("unsigned admin send to a serve with the embedded broker: %v\n%s\n%s", err, out, errOut)
	}
}
