package adminclient_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/kafka/adminclient"
)

// Given a signing key and the nodes' seal key, the client produces records that verify with the
// producer key and bind to its identity, with the password sealed (also in a command built by
// hand), and opens for the command it was sealed for.
func TestClientSignsAndSeals(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	kcfg := tkafka.Config{Brokers: testenv.Kafka(t), Partitions: 2}
	if err := tkafka.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	ops := domain.Actor{Type: domain.ActorAdmin, ID: "ops-7"}
	g, err := admintrust.GenerateProducerKey(admintrust.AlgEd25519, "ops-1", admintrust.PlatformScope, ops)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := admintrust.ParseSigner(g.Signer)
	key, _ := admintrust.ParseProducerKey(g.Producer)
	open, _ := admintrust.GenerateOpenKey("cs-1")
	seal := open.SealKey()
	opener, _ := admintrust.NewOpener(open)
	verifier, _ := admintrust.NewVerifier(time.Minute, time.Second, key)

	if _, err := adminclient.New(adminclient.Config{Kafka: kcfg, Signer: signer, Actor: domain.Actor{Type: domain.ActorAdmin, ID: "root"}}); err == nil {
		t.Fatal("a client whose actor is not its key's identity was built")
	}
	c, err := adminclient.New(adminclient.Config{Kafka: kcfg, Signer: signer, SealKey: &seal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	built, err := c.NewCommand("acme", domain.CmdUserResetPassword, domain.UserResetPasswordPayload{UserID: 42, Password: domain.PlainSecret("correct horse")})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(built.Payload), "correct horse") || built.Actor != signer.Identity() {
		t.Fatalf("NewCommand: %+v %s", built.Actor, built.Payload)
	}
	byHand := built // Produce seals what NewCommand did not
	byHand.Payload = json.RawMessage(`{"user_id":"42","password":"battery staple"}`)
	for _, cmd := range []domain.AdminCommand{built, byHand} {
		if err := c.Produce(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}

	consumer, err := sarama.NewConsumer(kcfg.Brokers, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	topic := kcfg.Topic(tkafka.TopicAdminCommand)
	parts, _ := consumer.Partitions(topic)
	var (
		mu  sync.Mutex
		got []*sarama.ConsumerMessage
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	for _, p := range parts {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.AsyncClose()
		go func() {
			for m := range pc.Messages() {
				mu.Lock()
				got = append(got, m)
				mu.Unlock()
			}
		}()
	}
	for deadline := time.Now().Add(20 * time.Second); count() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records on %s", count(), topic)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, m := range got {
		h := admintrust.Headers{}
		for _, rh := range m.Headers {
			h[string(rh.Key)] = append(h[string(rh.Key)], string(rh.Value))
		}
		k, err := verifier.Verify(h, m.Key, m.Value, time.Now())
		if err != nil {
			t.Fatalf("record %d does not verify: %v", i, err)
		}
		var cmd domain.AdminCommand
		if err := json.Unmarshal(m.Value, &cmd); err != nil {
			t.Fatal(err)
		}
		if _, err := admintrust.Bind(k, cmd, false); err != nil {
			t.Fatalf("record %d does not bind to its key: %v", i, err)
		}
		var p domain.UserResetPasswordPayload
		if err := json.Unmarshal(cmd.Payload, &p); err != nil {
			t.Fatal(err)
		}
		sealed, ok := p.Password.Sealed()
		if !ok {
			t.Fatalf("record %d: the password is not sealed: %s", i, cmd.Payload)
		}
		text, err := opener.Open(admintrust.ContextOf(cmd, "password"), sealed)
		if err != nil || (string(text) != "correct horse" && string(text) != "battery staple") {
			t.Fatalf("record %d opens to %q, %v", i, text, err)
		}
	}
}
