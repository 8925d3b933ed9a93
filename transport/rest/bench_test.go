package rest_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/imledger/imledger/transport/rest"
)

// BenchmarkSend measures an authenticated send through the whole API (token check, Idempotency-Key
// claim and store, send handler) and the replay of a stored answer.
func BenchmarkSend(b *testing.B) {
	s := newStack(b, rest.Config{}, stackOpts{})
	tok := s.token(b, s.tenant, 7)
	b.Run("new key", func(b *testing.B) {
		for i := range b.N {
			a := s.do(b, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", token: tok,
				key: fmt.Sprintf("b-%d-%d", b.N, i), body: fmt.Sprintf(`{"client_msg_id":"b-%d-%d","content":"x"}`, b.N, i)})
			if a.Status != http.StatusCreated {
				b.Fatal(a.Raw)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for range b.N {
			a := s.do(b, req{method: http.MethodPost, path: "/v1/im/topics/grp1/messages", token: tok,
				key: "b-1-0", body: `{"client_msg_id":"b-1-0","content":"x"}`})
			if a.Header.Get(rest.HeaderIdempotentReplayed) != "true" {
				b.Fatal(a.Raw)
			}
		}
	})
}
