package msgstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/eventdecode"
)

// op is one decoded event, ready to apply.
type op struct {
	index  int
	env    domain.Envelope
	action domain.MessageAction // "" for event types this read model ignores
	topic  domain.Topic
	sent   domain.MessageSent
	recall domain.MessageRecalled
	edit   domain.MessageEdited
	del    domain.MessageDeletedForUser
	mark   domain.ReadMarked
	skip   domain.SeqSkipped
	// refused marks a sent or edited event whose content the store cannot hold: it is written
	// as a placeholder (StatusBlocked, no content) instead. Set by decodeOne for content that is
	// not JSON, and by the writers when the server refuses the content (tenantdb.IsDataError).
	refused bool
}

// messageActions maps the event types this read model consumes to their action and topic kind.
var messageActions = func() map[domain.EventType]struct {
	action domain.MessageAction
	kind   domain.TopicKind
} {
	out := map[domain.EventType]struct {
		action domain.MessageAction
		kind   domain.TopicKind
	}{}
	for _, k := range []domain.TopicKind{domain.TopicGroup, domain.TopicDirect} {
		for _, a := range []domain.MessageAction{domain.ActionSent, domain.ActionRecalled, domain.ActionEdited, domain.ActionDeleted, domain.ActionReadMarked, domain.ActionSeqSkipped} {
			out[domain.MessageEventType(k, a)] = struct {
				action domain.MessageAction
				kind   domain.TopicKind
			}{a, k}
		}
	}
	return out
}()

// decodeBatch decodes events in order, dropping repeats of an event id within the batch. Event
// types outside the message model decode to an op with no action: they are ignored.
func decodeBatch(tenant domain.TenantID, events []domain.Envelope) ([]op, error) {
	return eventdecode.Batch(tenant, events, decodeOne, func(i int, id uuid.UUID, err error) error {
		return &EventError{Index: i, EventID: id, Err: err}
	})
}

// bad is the error of a message event that can never be applied.
var bad = eventdecode.Bad

// decodeOne decodes the message event at index i of a batch whose tenant Batch has checked.
func decodeOne(i int, env domain.Envelope) (op, error) {
	o := op{index: i, env: env}
	info, ok := messageActions[env.EventType]
	if !ok {
		return o, nil
	}
	o.action = info.action
	topic, err := o.decodePayload(env)
	if err != nil {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			return o, err
		}
		return o, bad("payload", err.Error())
	}
	if o.topic, err = domain.ParseTopic(topic); err != nil {
		return o, err
	}
	if o.topic.Kind() != info.kind {
		return o, bad("topic", fmt.Sprintf("%s event on %s topic %s", info.kind, o.topic.Kind(), topic))
	}
	if o.action == domain.ActionSent && o.topic.Kind() == domain.TopicDirect && !o.topic.Has(o.sent.From) {
		return o, bad("payload", "sender is not a party of the 1:1 topic")
	}
	if s := o.seq(); o.action != domain.ActionReadMarked && s <= 0 {
		return o, bad("payload", "event without a seq")
	}
	return o, nil
}

// decodePayload decodes env's payload into o by o's action and answers the topic it names.
// Sent and edited content that is not JSON marks o refused rather than failing it.
func (o *op) decodePayload(env domain.Envelope) (topic string, err error) {
	switch o.action {
	case domain.ActionSent:
		return o.decodeSent(env)
	case domain.ActionRecalled:
		err = env.Decode(&o.recall)
		return o.recall.Topic, err
	case domain.ActionEdited:
		return o.decodeEdit(env)
	case domain.ActionDeleted:
		err = env.Decode(&o.del)
		if err == nil && o.del.User <= 0 {
			err = bad("payload", "deletion without a user")
		}
		return o.del.Topic, err
	case domain.ActionReadMarked:
		err = env.Decode(&o.mark)
		if err == nil && o.mark.User <= 0 {
			err = bad("payload", "read mark without a user")
		}
		return o.mark.Topic, err
	case domain.ActionSeqSkipped:
		err = env.Decode(&o.skip)
		if err == nil && o.skip.Seq == 0 {
			o.skip.Seq = env.StreamVersion
		}
		return o.skip.Topic, err
	}
	return "", nil
}

// decodeSent decodes a sent event: an event without a seq of its own has its stream version.
func (o *op) decodeSent(env domain.Envelope) (string, error) {
	err := env.Decode(&o.sent)
	if err == nil && o.sent.Seq == 0 {
		o.sent.Seq = env.StreamVersion
	}
	if err == nil && (o.sent.Seq <= 0 || o.sent.From <= 0) {
		err = bad("payload", "sent event without seq or sender")
	}
	o.refused = err == nil && len(o.sent.Content) > 0 && !json.Valid(o.sent.Content)
	return o.sent.Topic, err
}

// decodeEdit decodes an edit, which must carry a version of 2 or more.
func (o *op) decodeEdit(env domain.Envelope) (string, error) {
	err := env.Decode(&o.edit)
	if err == nil && o.edit.EditVersion < 2 {
		err = bad("payload", "edit without a version >= 2")
	}
	o.refused = err == nil && !json.Valid(o.edit.Content)
	return o.edit.Topic, err
}

// seq is the message seq an op addresses (0 for read marks).
func (o op) seq() int64 {
	switch o.action {
	case domain.ActionSent:
		return o.sent.Seq
	case domain.ActionRecalled:
		return o.recall.Seq
	case domain.ActionEdited:
		return o.edit.Seq
	case domain.ActionDeleted:
		return o.del.Seq
	case domain.ActionSeqSkipped:
		return o.skip.Seq
	}
	return 0
}

// holdsSeq reports whether the op puts a seq of its conversation in place: a message or a
// seq-skip marker. Those are what the watermark counts.
func (o op) holdsSeq() bool {
	return o.action == domain.ActionSent || o.action == domain.ActionSeqSkipped
}

// at returns t in millisecond UTC, or the event's time when the payload left it unset, within
// the range a DATETIME column holds: a time the server would refuse is no reason to lose a row.
func (o op) at(t time.Time) time.Time {
	if t.IsZero() {
		t = o.env.OccurredAt
	}
	return readmodels.Millis(clampTime(t))
}

// The range of a MySQL DATETIME(3).
var (
	minDatetime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDatetime = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
)

// clampTime returns t moved into the range of a DATETIME column.
func clampTime(t time.Time) time.Time {
	switch {
	case t.Before(minDatetime):
		return minDatetime
	case t.After(maxDatetime):
		return maxDatetime
	}
	return t
}
