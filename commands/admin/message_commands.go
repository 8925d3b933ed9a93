package admin

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
)

// RecallData is the result data of message.recall.
type RecallData struct {
	Topic      string `json:"topic"`
	Seq        string `json:"seq"`
	MessageID  string `json:"message_id"`
	RecalledAt string `json:"recalled_at"`
}

func (d *dispatcher) messageRecall(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.MessageRecallPayload)
	topic, err := domain.ParseTopic(p.Topic)
	if err != nil {
		return nil, err
	}
	res, err := d.h.Messages.RecallByModerator(ctx, message.ModerationRecall{Tenant: r.tenant, Topic: topic, Seq: p.Seq,
		Moderator: r.actor(), Reason: p.Reason, TraceID: r.TraceID, CausationID: r.causation()})
	if err != nil {
		return nil, err
	}
	return RecallData{Topic: topic.String(), Seq: strconv.FormatInt(res.Seq, 10), MessageID: res.MessageID,
		RecalledAt: res.RecalledAt.UTC().Format(time.RFC3339Nano)}, nil
}

// SentData is the result data of message.broadcast to a group.
type SentData struct {
	Scope     string `json:"scope"`
	Topic     string `json:"topic"`
	Seq       string `json:"seq"`
	MessageID string `json:"message_id"`
	Duplicate bool   `json:"duplicate"`
}

// messageBroadcast sends a system message to a group, as its owner with the administrator as
// actor and the command's event id as client_msg_id (so a rerun is answered as a duplicate), or
// records and delivers one to the whole tenant.
func (d *dispatcher) messageBroadcast(ctx context.Context, r run) (any, error) {
	p := r.payload.(*domain.MessageBroadcastPayload)
	content, err := domain.NewContent(p.Content, d.h.MaxContentBytes)
	if err != nil {
		return nil, err
	}
	if p.GroupID == 0 {
		return d.broadcastTenant(ctx, r, content)
	}
	g, err := d.h.GroupStates.Group(ctx, r.tenant, p.GroupID, 0)
	if err != nil {
		return nil, err
	}
	switch {
	case !g.Exists():
		return nil, domain.ErrNotFound
	case g.Dissolved():
		return nil, domain.Deny(domain.ReasonGroupDissolved)
	}
	topic, err := p.GroupID.Topic()
	if err != nil {
		return nil, err
	}
	cmid, err := domain.NewClientMsgID("adm-" + r.EventID.String())
	if err != nil {
		return nil, err
	}
	res, err := d.h.Sender.Handle(ctx, message.SendMessage{Tenant: r.tenant, From: g.Owner(), Topic: topic, ClientMsgID: cmid,
		MsgType: domain.MsgSystem, Content: content, TraceID: r.TraceID, Actor: r.actor()})
	if err != nil {
		return nil, err
	}
	return SentData{Scope: "group", Topic: topic.String(), Seq: strconv.FormatInt(res.Seq, 10), MessageID: res.MessageID,
		Duplicate: res.Duplicate}, nil
}

func isConcurrency(err error) bool { return errors.Is(err, domain.ErrConcurrency) }
