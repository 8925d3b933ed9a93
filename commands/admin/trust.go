package admin

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
)

// newItem verifies and decodes a command record, once: the batch's de-duplication and the
// command's run both read the decoded envelope. A record the trust checks or the decoding refuse
// gets decErr: it is answered at once and nothing of it is written; its actor is not echoed.
func (c *Consumer) newItem(m *sarama.ConsumerMessage) *item {
	it := &item{msg: m, key: string(m.Key)}
	key, err := c.verify(m)
	if err != nil {
		it.cmd, _ = decodeCommand(m.Value) // only what the answer repeats: event_id, tenant_id, event_type, trace_id
		it.cmd.Actor, it.decErr = domain.Actor{}, err
		return it
	}
	if it.cmd, it.decErr = decodeCommand(m.Value); it.decErr == nil {
		it.cmd, it.decErr = c.admit(key, it.cmd)
	}
	if it.decErr != nil {
		it.cmd.Actor = domain.Actor{}
	}
	return it
}

// verify checks the signature of record m with the producer keys and returns the key that signed
// it; nil for an unsigned record the consumer accepts (Config.AllowUnsigned). It reads only the
// signature headers, the record key and a digest of the value. Errors are rejections.
func (c *Consumer) verify(m *sarama.ConsumerMessage) (*admintrust.ProducerKey, error) {
	h := admintrust.Headers{}
	for _, rh := range m.Headers {
		if rh == nil {
			continue
		}
		switch name := string(rh.Key); name {
		case admintrust.HeaderKeyID, admintrust.HeaderSignedAt, admintrust.HeaderSignature:
			h[name] = append(h[name], string(rh.Value))
		}
	}
	k, err := c.verifier.Verify(h, m.Key, m.Value, time.Now())
	var refusal *admintrust.Refusal
	switch {
	case err == nil:
		return &k, nil
	case errors.Is(err, admintrust.ErrSignatureRequired) && c.cfg.AllowUnsigned:
		return nil, nil
	case errors.As(err, &refusal):
		return nil, trustRejection(refusal)
	}
	return nil, reject(ReasonSignatureInvalid, "", nil)
}

// admit binds a decoded command to the key that signed it (nil: unsigned and accepted) and
// checks the form of its secret fields, before anything of it is written: a key of another
// tenant, an actor other than the key's identity, a plain secret where only sealed ones are
// taken, or a redacted one, are rejections.
func (c *Consumer) admit(k *admintrust.ProducerKey, cmd domain.AdminCommand) (domain.AdminCommand, error) {
	info, known := domain.LookupAdminCommand(domain.AdminCommandType(cmd.EventType))
	var err error
	if k != nil {
		cmd, err = admintrust.Bind(*k, cmd, known && info.Platform)
	} else {
		cmd, err = admintrust.BindUnsigned(cmd)
	}
	var refusal *admintrust.Refusal
	if errors.As(err, &refusal) {
		return cmd, trustRejection(refusal)
	}
	if err != nil {
		return cmd, err
	}
	if !known {
		return cmd, nil // check answers unknown_command
	}
	kinds, err := info.SecretFieldKinds(cmd.Payload)
	if err != nil {
		return cmd, nil // decodePayload answers invalid_payload
	}
	for _, field := range info.SecretFields() {
		switch kinds[field] {
		case domain.SecretPlain:
			if !c.cfg.AllowUnsigned {
				return cmd, reject(ReasonSecretNotSealed, field, map[string]any{"field": field})
			}
		case domain.SecretRedacted:
			return cmd, reject(ReasonSecretRedacted, field, map[string]any{"field": field})
		}
	}
	return cmd, nil
}

// secrets opens the secret fields of commands for the handlers that need them.
type secrets struct {
	opener     *admintrust.Opener
	allowPlain bool // Config.AllowUnsigned
}

// reveal returns the text of secret field of r: a sealed one opened with the node's keys for
// this command and field, a plain one only where plain secrets are allowed. Call it right before
// the handler that needs the text, and keep the text nowhere else.
func (s secrets) reveal(r run, field string, v domain.Secret) (string, error) {
	if sealed, ok := v.Sealed(); ok {
		text, err := s.opener.Open(admintrust.ContextOf(r.AdminCommand, field), sealed)
		if err != nil {
			return "", reject(ReasonSecretUnreadable, err.Error(), map[string]any{"field": field})
		}
		return string(text), nil
	}
	if v.Redacted() {
		return "", reject(ReasonSecretRedacted, field, map[string]any{"field": field})
	}
	if text, ok := v.Plain(); ok {
		if !s.allowPlain {
			return "", reject(ReasonSecretNotSealed, field, map[string]any{"field": field})
		}
		return text, nil
	}
	return "", &domain.ValidationError{Field: field, Reason: "required"}
}

// redactedValue is a command record value as it may be stored or re-published (failures, dead
// letters): value itself for a command without secret fields, else value with the secret fields
// of its payload replaced by the redaction marker, sealed ones included. A value that is not a
// JSON object, of a command with secret fields, gives way to a stub naming the command.
func redactedValue(value []byte, cmd domain.AdminCommand) []byte {
	info, ok := domain.LookupAdminCommand(domain.AdminCommandType(cmd.EventType))
	if !ok || len(info.SecretFields()) == 0 {
		return value
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(value, &fields) != nil || fields == nil {
		stub, _ := json.Marshal(map[string]any{"event_id": cmd.EventID, "tenant_id": cmd.TenantID, "event_type": cmd.EventType,
			"payload": json.RawMessage(`{"redacted":true}`)})
		return stub
	}
	for k, v := range fields {
		if strings.EqualFold(k, "payload") { // encoding/json reads a key of any case into Payload
			fields[k], _ = info.Redact(v)
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"event_id": cmd.EventID, "payload": json.RawMessage(`{"redacted":true}`)})
	}
	return b
}
