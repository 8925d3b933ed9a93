package actiontoken

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tokendb"
)

// token is a token's state, folded from its stream: version 0 is a token its stream does not
// know.
type token struct {
	version    int64
	issued     domain.ActionTokenIssued
	state      string
	consumedBy domain.UserID
}

// apply folds one event of the token's stream.
func (t *token) apply(e domain.Envelope) error {
	switch e.EventType {
	case domain.EventActionTokenIssued:
		if err := e.Decode(&t.issued); err != nil {
			return err
		}
		t.state = StateActive
	case domain.EventActionTokenConsumed:
		var p domain.ActionTokenConsumed
		if err := e.Decode(&p); err != nil {
			return err
		}
		t.state, t.consumedBy = StateConsumed, p.By
	case domain.EventActionTokenRevoked:
		t.state = StateRevoked
	case domain.EventActionTokenUnconsumed:
		t.state, t.consumedBy = StateActive, 0
	default:
		return fmt.Errorf("event type %s on a token's stream", e.EventType)
	}
	t.version = e.StreamVersion
	return nil
}

// hot is what the Redis cache holds of the token.
func (t token) hot() hot {
	by := t.issued.CreatedBy.Int64()
	return hot{ID: t.issued.TokenID, Action: Action(t.issued.Action), Subject: t.issued.Subject, By: &by,
		Exp: t.issued.ExpiresAt.UnixMilli(), V: t.version}
}

// hot is what Redis keeps of an active token.
type hot struct {
	ID      string `json:"id"`
	Action  Action `json:"action"`
	Subject string `json:"subject"`
	By      *int64 `json:"by,omitempty"` // the issuer; absent in entries cached before it was kept
	Exp     int64  `json:"exp"`          // unix ms
	V       int64  `json:"v,omitempty"`  // the stream's version; absent in entries cached before tokens were events
}

// maxAttempts bounds how often an operation on a token is decided again after losing the race
// for its stream.
const maxAttempts = 5

// load folds the stream of the token whose id is id (derived from hash when empty). A stream
// without events may still be a token written before tokens were events: its row is recorded in
// the stream then (adopt), or found on the stream its row names.
func (s *Service) load(ctx context.Context, tenant domain.TenantID, hash, id string) (token, error) {
	if id == "" {
		id = tokenIDOf(hash)
	}
	t, err := s.fold(ctx, tenant, id)
	if err != nil || t.version > 0 {
		return t, err
	}
	row, found, err := s.rows.Find(ctx, tenant, hash, id)
	if err != nil || !found {
		return t, err
	}
	if row.Version > 0 {
		return s.fold(ctx, tenant, row.TokenID)
	}
	return s.adopt(ctx, tenant, row)
}

// fold reads the token's stream.
func (s *Service) fold(ctx context.Context, tenant domain.TenantID, id string) (token, error) {
	var t token
	for {
		evs, err := s.es.ReadStream(ctx, tenant, domain.ActionTokenStreamID(id), t.version, 0)
		if err != nil {
			return t, err
		}
		for _, e := range evs {
			if err := t.apply(e); err != nil {
				return t, fmt.Errorf("actiontoken: token %s: %w", id, err)
			}
		}
		if len(evs) == 0 {
			return t, nil
		}
	}
}

// adopt records a token written before tokens were events in its stream (its issue, and its end
// if it ended), so that it is decided like any other from now on.
func (s *Service) adopt(ctx context.Context, tenant domain.TenantID, row tokendb.Row) (token, error) {
	issued := domain.ActionTokenIssued{TokenID: row.TokenID, Action: row.Action, Subject: row.Subject, CreatedBy: row.CreatedBy,
		TokenSHA256: row.TokenHash, IssuedAt: row.CreatedAt.UTC(), ExpiresAt: row.ExpiresAt.UTC()}
	events := []event{{domain.EventActionTokenIssued, issued}}
	switch row.State {
	case StateConsumed:
		events = append(events, event{domain.EventActionTokenConsumed,
			domain.ActionTokenConsumed{TokenID: row.TokenID, By: row.ConsumedBy, ConsumedAt: row.FinishedAt.UTC()}})
	case StateRevoked:
		events = append(events, event{domain.EventActionTokenRevoked,
			domain.ActionTokenRevoked{TokenID: row.TokenID, Reason: "revoked", RevokedAt: row.FinishedAt.UTC()}})
	}
	stored, err := s.append(ctx, tenant, row.TokenID, 0, events...)
	if errors.Is(err, domain.ErrConcurrency) { // adopted meanwhile
		return s.fold(ctx, tenant, row.TokenID)
	}
	if err != nil {
		return token{}, err
	}
	var t token
	for _, e := range stored {
		if err := t.apply(e); err != nil {
			return token{}, err
		}
	}
	return t, nil
}

// event is an event to append to a token's stream.
type event struct {
	typ     domain.EventType
	payload any
}

// append appends events to the stream of token id at version from, then writes them to the
// token's row; a failure to write the row is logged, since the projection writes it too.
func (s *Service) append(ctx context.Context, tenant domain.TenantID, id string, from int64, events ...event) ([]domain.Envelope, error) {
	stream := domain.ActionTokenStreamID(id)
	envs := make([]domain.Envelope, len(events))
	for i, e := range events {
		env, err := domain.NewEnvelope(tenant, stream, from+int64(i)+1, e.typ, domain.Actor{Type: domain.ActorSystem, ID: domain.SourceService}, e.payload)
		if err != nil {
			return nil, err
		}
		env.BizID = id
		envs[i] = env
	}
	stored, err := s.es.Append(ctx, tenant, stream, from, envs)
	if err != nil {
		return nil, err
	}
	if _, err := s.rows.Apply(context.WithoutCancel(ctx), tenant, stored); err != nil {
		s.log.WarnContext(ctx, "actiontoken: the token's row is written by the projection later", "tenant_id", tenant.String(),
			"token_id", id, "err", err)
	}
	return stored, nil
}

// stamp is the time an event records: milliseconds, as the row keeps it.
func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Millisecond) }
