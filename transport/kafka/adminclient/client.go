// Package adminclient is what an admin system imports to use imledger's admin plane: it
// produces commands on im.admin.command in the event envelope, signed with its producer key and
// their secret fields sealed to the nodes' command-secrets key (domain/admintrust), and waits for
// their results on im.admin.command.result, correlated by event id. It imports no command
// handler: the contract is the wire format of domain.AdminCommand and domain.AdminResult, with
// the JSON Schemas in domain/schemas/commands, and the signature of domain/admintrust.
package adminclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	tkafka "github.com/imledger/imledger/internal/kafka"
)

// ErrTimeout means no result arrived for a command within the wait: it may still run (produce
// the same command, same event_id, again to be answered its result).
var ErrTimeout = errors.New("adminclient: no result in time")

// Config configures a Client.
type Config struct {
	// Kafka is the cluster and topic prefix of the imledger deployment. Required.
	Kafka tkafka.Config
	// Source is the source_service of the commands. Default "imledger-admin".
	Source string
	// Actor is who the commands are from, the actor of the events they write. With a Signer it
	// is the signer's identity (another is an error); without, default {admin, "admin"}.
	Actor domain.Actor
	// Signer signs every command produced (admintrust.ParseSigner reads the spec `imledger admin
	// keygen` prints). Nodes with real Kafka brokers refuse unsigned commands; nil produces them
	// unsigned, which only a node on the embedded broker may accept.
	Signer *admintrust.Signer
	// SealKey is the nodes' public command-secrets key (admintrust.ParseSealKey): the secret
	// fields of every command (a password) are sealed to it before they leave the client. Nodes
	// with real Kafka brokers refuse a plain secret; nil leaves secrets as they are.
	SealKey *admintrust.SealKey
	// Timeout is how long Send waits for a result when ctx has no deadline. Default 30 s.
	Timeout time.Duration
}

// Client produces admin commands and correlates their results. It is safe for concurrent use.
type Client struct {
	cfg      Config
	producer sarama.SyncProducer
	consumer sarama.Consumer
	parts    []sarama.PartitionConsumer
	topic    string

	mu      sync.Mutex
	waiting map[string]chan domain.AdminResult
	wg      sync.WaitGroup
}

// New connects a Client: a consumer at the end of every partition of the result topic first, so
// no result of a command sent afterwards is missed, then a producer.
func New(cfg Config) (*Client, error) {
	if cfg.Source == "" {
		cfg.Source = "imledger-admin"
	}
	if s := cfg.Signer; s != nil {
		id := s.Identity()
		if a := cfg.Actor; a != (domain.Actor{}) && (a.Type != id.Type || a.ID != id.ID) {
			return nil, fmt.Errorf("adminclient: actor %s/%s is not the identity of signing key %s (%s/%s)", a.Type, a.ID, s.KeyID(), id.Type, id.ID)
		}
		cfg.Actor = id
	}
	if cfg.Actor == (domain.Actor{}) {
		cfg.Actor = domain.Actor{Type: domain.ActorAdmin, ID: "admin"}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	sc, err := tkafka.NewSaramaConfig(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, topic: cfg.Kafka.Topic(tkafka.TopicAdminCommand), waiting: map[string]chan domain.AdminResult{}}
	if c.consumer, err = sarama.NewConsumer(cfg.Kafka.Brokers, sc); err != nil {
		return nil, fmt.Errorf("adminclient: connect consumer: %w", err)
	}
	results := cfg.Kafka.Topic(tkafka.TopicAdminCommandResult)
	parts, err := c.consumer.Partitions(results)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("adminclient: partitions of %s: %w", results, err)
	}
	for _, p := range parts {
		pc, err := c.consumer.ConsumePartition(results, p, sarama.OffsetNewest)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("adminclient: consume %s/%d: %w", results, p, err)
		}
		c.parts = append(c.parts, pc)
		c.wg.Add(1)
		go c.dispatch(pc)
	}
	if c.producer, err = tkafka.NewSyncProducer(cfg.Kafka); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// dispatch hands each result to the Send waiting for it; results of other clients' commands are
// dropped.
func (c *Client) dispatch(pc sarama.PartitionConsumer) {
	defer c.wg.Done()
	for m := range pc.Messages() {
		var r domain.AdminResult
		if err := json.Unmarshal(m.Value, &r); err != nil {
			continue
		}
		c.mu.Lock()
		ch := c.waiting[r.CommandEventID]
		delete(c.waiting, r.CommandEventID)
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// NewCommand builds a command of type typ for tenant with payload (a value marshalled to JSON,
// such as a domain payload type or a map), a fresh UUIDv7 event id, the client's source and
// actor, and biz_type/biz_id from the payload's user_id, group_id or topic. Its secret fields are
// sealed to Config.SealKey (for this command: keep its event id).
func (c *Client) NewCommand(tenant string, typ domain.AdminCommandType, payload any) (domain.AdminCommand, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return domain.AdminCommand{}, fmt.Errorf("adminclient: payload: %w", err)
	}
	if payload == nil {
		raw = json.RawMessage(`{}`)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return domain.AdminCommand{}, err
	}
	cmd := domain.AdminCommand{EventID: id, TraceID: id.String(), TenantID: tenant, SourceService: c.cfg.Source,
		TargetService: domain.SourceService, EventType: string(typ), IdempotencyKey: id.String(),
		Version: domain.AdminCommandVersion, OccurredAt: time.Now().UTC(), Actor: c.cfg.Actor, Payload: raw}
	cmd.BizType, cmd.BizID = bizOf(raw)
	if cmd.Payload, err = c.seal(cmd); err != nil {
		return domain.AdminCommand{}, err
	}
	return cmd, nil
}

// seal returns cmd's payload with its plain secret fields sealed to Config.SealKey.
func (c *Client) seal(cmd domain.AdminCommand) (json.RawMessage, error) {
	if c.cfg.SealKey == nil {
		return cmd.Payload, nil
	}
	p, err := admintrust.SealPayload(*c.cfg.SealKey, cmd)
	if err != nil {
		return nil, fmt.Errorf("adminclient: seal the secret fields: %w", err)
	}
	return p, nil
}

// bizOf names what a payload is about, for biz_type and biz_id and the record key.
func bizOf(raw json.RawMessage) (string, string) {
	var p struct {
		UserID  string `json:"user_id"`
		GroupID string `json:"group_id"`
		Topic   string `json:"topic"`
	}
	_ = json.Unmarshal(raw, &p)
	switch {
	case p.GroupID != "":
		return domain.BizTypeGroup, p.GroupID
	case p.UserID != "":
		return domain.BizTypeUser, p.UserID
	case p.Topic != "":
		return "topic", p.Topic
	}
	return domain.BizTypeTenant, ""
}

var keySafe = regexp.MustCompile(`^[A-Za-z0-9._:-]*$`)

// Key is the record key of cmd: "<tenant>:<biz_type>:<biz_id>", so the commands about one user,
// group or conversation are consumed in the order they were produced; "<tenant>" for tenant
// commands.
func Key(cmd domain.AdminCommand) string {
	if cmd.BizID == "" || !keySafe.MatchString(cmd.BizID) {
		return cmd.TenantID
	}
	return cmd.TenantID + ":" + cmd.BizType + ":" + cmd.BizID
}

// Produce sends cmd on im.admin.command, keyed by Key, and returns when the broker acked it:
// its plain secret fields sealed to Config.SealKey and the record signed by Config.Signer now.
// Producing the same command again (same event_id) within the nodes' replay window is answered
// with its first result.
func (c *Client) Produce(ctx context.Context, cmd domain.AdminCommand) error {
	var err error
	if cmd.Payload, err = c.seal(cmd); err != nil {
		return err
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	key := Key(cmd)
	msg := &sarama.ProducerMessage{Topic: c.topic, Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(body),
		Headers: []sarama.RecordHeader{
			{Key: []byte("event_id"), Value: []byte(cmd.EventID.String())},
			{Key: []byte("event_type"), Value: []byte(cmd.EventType)},
			{Key: []byte("tenant_id"), Value: []byte(cmd.TenantID)},
		}}
	if c.cfg.Signer != nil {
		sig := c.cfg.Signer.Sign([]byte(key), body, time.Now())
		for _, name := range []string{admintrust.HeaderKeyID, admintrust.HeaderSignedAt, admintrust.HeaderSignature} {
			msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(name), Value: []byte(sig[name])})
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, _, err := c.producer.SendMessage(msg); err != nil {
		return fmt.Errorf("adminclient: produce: %w", err)
	}
	return nil
}

// Send produces cmd and waits for its result until ctx ends (Config.Timeout when ctx has no
// deadline): ErrTimeout then. A rejected or failed command is a result, not an error.
func (c *Client) Send(ctx context.Context, cmd domain.AdminCommand) (domain.AdminResult, error) {
	p := c.Expect(cmd.EventID)
	defer p.Cancel()
	if err := c.Produce(ctx, cmd); err != nil {
		return domain.AdminResult{}, err
	}
	return p.Await(ctx)
}

// Pending is a result the client waits for.
type Pending struct {
	c  *Client
	id string
	ch chan domain.AdminResult
}

// Expect starts waiting for the result of the command with event id id, for a command produced
// after it returns (by Produce, or by another producer such as a dead-letter replay).
func (c *Client) Expect(id uuid.UUID) *Pending {
	p := &Pending{c: c, id: id.String(), ch: make(chan domain.AdminResult, 1)}
	c.mu.Lock()
	c.waiting[p.id] = p.ch
	c.mu.Unlock()
	return p
}

// Await waits for the result until ctx ends (Config.Timeout when ctx has no deadline):
// ErrTimeout then.
func (p *Pending) Await(ctx context.Context) (domain.AdminResult, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.c.cfg.Timeout)
		defer cancel()
	}
	defer p.Cancel()
	select {
	case r := <-p.ch:
		return r, nil
	case <-ctx.Done():
		return domain.AdminResult{}, fmt.Errorf("command %s: %w", p.id, ErrTimeout)
	}
}

// Cancel stops waiting.
func (p *Pending) Cancel() {
	p.c.mu.Lock()
	if p.c.waiting[p.id] == p.ch {
		delete(p.c.waiting, p.id)
	}
	p.c.mu.Unlock()
}

// Close stops the consumer and the producer.
func (c *Client) Close() {
	for _, pc := range c.parts {
		pc.AsyncClose()
	}
	c.wg.Wait()
	if c.consumer != nil {
		_ = c.consumer.Close()
	}
	if c.producer != nil {
		_ = c.producer.Close()
	}
}
