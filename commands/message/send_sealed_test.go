package message_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/shred"
	"github.com/imledger/imledger/domain"
)

// heard records the committed messages a CommitListener hears.
type heard struct {
	mu   sync.Mutex
	msgs []message.CommittedMessage
}

func (h *heard) MessagesCommitted(_ context.Context, msgs []message.CommittedMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, msgs...)
}

// TestSendSealsContentAndDeliversPlaintext: with a Sealer, the stored event holds the content
// sealed under the sender's key, which opens back to what was sent; the commit listener (the
// realtime fanout) hears the plaintext; a sender whose keys were destroyed is refused and nothing
// is written.
func TestSendSealsContentAndDeliversPlaintext(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	e := newSendEnv(t, message.SendMessageConfig{})
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	url, _ := shred.LocalKeeperURL(base64.StdEncoding.EncodeToString(key))
	keepers, err := shred.NewURLKeepers(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = keepers.Close() })
	keys, err := shred.New(e.pool, keepers, shred.Config{})
	if err != nil {
		t.Fatal(err)
	}
	listener := &heard{}
	h := e.handler(t, message.SendMessageDeps{Sealer: keys, Listener: listener}, message.SendMessageConfig{})
	if _, err := h.Handle(ctx, e.cmd(t, "grp7", 42, "c1", "a private word")); err != nil {
		t.Fatal(err)
	}
	stored := e.stream(t, "grp7")
	if len(stored) != 1 || strings.Contains(string(stored[0].Payload), "private") {
		t.Fatalf("stored: %d events, payload %s: want the content sealed", len(stored), stored[0].Payload)
	}
	opened, err := domain.OpenEnvelope(ctx, stored[0], keys)
	if err != nil {
		t.Fatal(err)
	}
	if p := sentPayload(t, opened); string(p.Content) != `"a private word"` {
		t.Fatalf("opened content %s", p.Content)
	}
	listener.mu.Lock()
	got := listener.msgs
	listener.mu.Unlock()
	if len(got) != 1 || string(got[0].Content.Raw()) != `"a private word"` {
		t.Fatalf("the listener heard %+v, want the plaintext", got)
	}
	if _, err := keys.DestroyUser(ctx, e.tenant, 42); err != nil {
		t.Fatal(err)
	}
	_, err = h.Handle(ctx, e.cmd(t, "grp7", 42, "c2", "after the erasure"))
	var denied *domain.DeniedError
	if !errors.As(err, &denied) {
		t.Fatalf("a send of an erased user: %v, want it denied", err)
	}
	if n := len(e.stream(t, "grp7")); n != 1 {
		t.Fatalf("%d events after the refused send, want 1", n)
	}
}
