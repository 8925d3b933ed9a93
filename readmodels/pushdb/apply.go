package pushdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/eventdecode"
	"github.com/imledger/imledger/readmodels/internal/tablefold"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Tables names the tables of the push settings read model that ApplyBatch writes. The projection
// and the queries use DefaultTables; a rebuild writes DefaultTables().WithSuffix("_rebuild") and
// then swaps them in (Model). The reminder log (im_push_log) is not part of it: the worker writes
// it, and no event says what it holds.
type Tables struct {
	Devices string // im_push_devices
	Mutes   string // im_push_mutes
}

// DefaultTables returns the live table names created by the migrations.
func DefaultTables() Tables { return Tables{Devices: "im_push_devices", Mutes: "im_push_mutes"} }

// WithSuffix returns t with s appended to every name, e.g. "_rebuild".
func (t Tables) WithSuffix(s string) Tables {
	return Tables{Devices: t.Devices + s, Mutes: t.Mutes + s}
}

func (t Tables) list() []string { return []string{t.Devices, t.Mutes} }

// model is the push settings read model as tablefold drives it: rows written before the push
// settings were events (version 0) are carried into a rebuild's fresh tables.
var model = tablefold.Model[Tables]{Pkg: "pushdb", Live: DefaultTables(), Names: Tables.list, Decode: decodeOne, PreLog: true,
	Columns: []string{
		"user_id, device_id, provider, token, platform, created_at, updated_at, version, COALESCE(removed_at, '')",
		"topic, user_id, muted, created_at, COALESCE(updated_at, ''), version",
	}}

// Model returns the read model's tables as a rebuild drives them: fresh copies with a suffix
// created like the live ones (with the rows older than the log), swapped in, dropped.
func Model() tablefold.Model[Tables] { return model }

// Validate checks that every name is 1 to 60 characters of [A-Za-z0-9_] and that they differ.
func (t Tables) Validate() error { return model.Validate(t) }

// EventError says which event of a batch could not be applied; Err wraps domain.ErrInvalid for
// an event that can never be applied (bad payload, another tenant, a stream that does not match).
type EventError = readmodels.EventError

// Statements of the fold. Every row carries the stream version of the event that wrote it and
// an event changes a row only when it is newer, so an event applied again, or an older one after
// a newer, changes nothing. A removed device keeps its row with an empty token and removed_at set
// (a tombstone), an unmuted conversation with muted = 0, so that no redelivery of an older event
// brings either back. In each update the version is assigned last: MySQL evaluates the
// assignments in order, and the ones before read the old version.
const (
	registerStmt = "INSERT INTO %s (user_id, device_id, provider, token, platform, created_at, updated_at, version, removed_at)" +
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL) ON DUPLICATE KEY UPDATE" +
		" provider = IF(version < VALUES(version), VALUES(provider), provider)," +
		" token = IF(version < VALUES(version), VALUES(token), token)," +
		" platform = IF(version < VALUES(version), VALUES(platform), platform)," +
		" updated_at = IF(version < VALUES(version), VALUES(updated_at), updated_at)," +
		" removed_at = IF(version < VALUES(version), NULL, removed_at)," +
		" version = GREATEST(version, VALUES(version))"
	removeStmt = "INSERT INTO %s (user_id, device_id, provider, token, platform, created_at, updated_at, version, removed_at)" +
		" VALUES (?, ?, '', '', '', ?, ?, ?, ?) ON DUPLICATE KEY UPDATE" +
		" token = IF(version < VALUES(version), '', token)," +
		" updated_at = IF(version < VALUES(version), VALUES(updated_at), updated_at)," +
		" removed_at = IF(version < VALUES(version), VALUES(removed_at), removed_at)," +
		" version = GREATEST(version, VALUES(version))"
	muteStmt = "INSERT INTO %s (topic, user_id, muted, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?)" +
		" ON DUPLICATE KEY UPDATE muted = IF(version < VALUES(version), VALUES(muted), muted)," +
		" updated_at = IF(version < VALUES(version), VALUES(updated_at), updated_at)," +
		" version = GREATEST(version, VALUES(version))"
)

// decodeOne decodes a push event of a batch and checks it against its stream.
func decodeOne(tables Tables) func(int, domain.Envelope) (tablefold.Op, error) {
	return func(_ int, env domain.Envelope) (tablefold.Op, error) {
		at := func(t time.Time) time.Time {
			if t.IsZero() {
				t = env.OccurredAt
			}
			return readmodels.Millis(t)
		}
		v := env.StreamVersion
		switch env.EventType {
		case domain.EventPushDeviceRegistered:
			var p domain.PushDeviceRegistered
			if err := decode(env, &p, func() string { return domain.PushDeviceStreamID(p.User, p.DeviceID) }); err != nil {
				return tablefold.Op{}, err
			}
			if err := p.Validate(); err != nil {
				return tablefold.Op{}, eventdecode.Bad("payload", err.Error())
			}
			t := at(p.RegisteredAt)
			return tablefold.Op{Stmt: fmt.Sprintf(registerStmt, tableset.Quote(tables.Devices)),
				Args: []any{p.User.Int64(), p.DeviceID, p.Provider, p.Token, p.Platform, t, t, v}}, nil
		case domain.EventPushDeviceRemoved:
			var p domain.PushDeviceRemoved
			if err := decode(env, &p, func() string { return domain.PushDeviceStreamID(p.User, p.DeviceID) }); err != nil {
				return tablefold.Op{}, err
			}
			t := at(p.RemovedAt)
			return tablefold.Op{Stmt: fmt.Sprintf(removeStmt, tableset.Quote(tables.Devices)),
				Args: []any{p.User.Int64(), p.DeviceID, t, t, v, t}}, nil
		case domain.EventPushConversationMuted, domain.EventPushConversationUnmuted:
			return decodeMute(env, tables, at)
		}
		return tablefold.Op{}, nil
	}
}

// decodeMute decodes a mute or an unmute.
func decodeMute(env domain.Envelope, tables Tables, at func(time.Time) time.Time) (tablefold.Op, error) {
	var (
		user  domain.UserID
		topic string
		when  time.Time
		muted = env.EventType == domain.EventPushConversationMuted
	)
	if muted {
		var p domain.PushConversationMuted
		if err := env.Decode(&p); err != nil {
			return tablefold.Op{}, eventdecode.Bad("payload", err.Error())
		}
		user, topic, when = p.User, p.Topic, p.MutedAt
	} else {
		var p domain.PushConversationUnmuted
		if err := env.Decode(&p); err != nil {
			return tablefold.Op{}, eventdecode.Bad("payload", err.Error())
		}
		user, topic, when = p.User, p.Topic, p.UnmutedAt
	}
	tp, err := domain.ParseTopic(topic)
	switch {
	case user <= 0:
		return tablefold.Op{}, eventdecode.Bad("user", "must be positive")
	case err != nil:
		return tablefold.Op{}, eventdecode.Bad("topic", err.Error())
	case env.StreamID != domain.PushMuteStreamID(user, tp):
		return tablefold.Op{}, eventdecode.Bad("stream_id", fmt.Sprintf("%s names stream %q, the payload belongs to %q", env.EventType,
			env.StreamID, domain.PushMuteStreamID(user, tp)))
	}
	t := at(when)
	return tablefold.Op{Stmt: fmt.Sprintf(muteStmt, tableset.Quote(tables.Mutes)),
		Args: []any{tp.String(), user.Int64(), muted, t, t, env.StreamVersion}}, nil
}

// decode unmarshals a device event into p and checks that the event is on the stream that
// stream, called after the payload is decoded, names.
func decode(env domain.Envelope, p any, stream func() string) error {
	if err := env.Decode(p); err != nil {
		return eventdecode.Bad("payload", err.Error())
	}
	if want := stream(); env.StreamID != want {
		return eventdecode.Bad("stream_id", fmt.Sprintf("%s names stream %q, the payload belongs to %q", env.EventType, env.StreamID, want))
	}
	return nil
}

// ApplyBatch folds one tenant's push events into tables in one transaction and returns how many
// changed a row. Other event types are ignored. Each row keeps the stream version of the last
// event applied to it, so the fold is idempotent and an older event never undoes a newer one.
//
// Errors: an *EventError wrapping domain.ErrInvalid for an event that can never be applied;
// domain.ErrNotFound (wrapped) for a tenant without a database; domain.ErrRetryable when MySQL
// is unreachable.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, tables Tables, events []domain.Envelope) (int, error) {
	return model.Apply(ctx, s.router, tenant, tables, events)
}

// Summary summarises the push settings read model of one tenant, table by table.
type Summary struct {
	Devices readmodels.TableSummary
	Mutes   readmodels.TableSummary
}

// Checksum summarises tables so two copies (the live tables and a rebuild) can be compared. Each
// row hashes every column the events decide; the token is hashed with the rest, so two copies
// that hold different tokens differ without either being printed.
func (s *Store) Checksum(ctx context.Context, tenant domain.TenantID, tables Tables) (Summary, error) {
	sums, err := model.Checksum(ctx, s.router, tenant, tables)
	if err != nil {
		return Summary{}, err
	}
	return Summary{Devices: sums[0], Mutes: sums[1]}, nil
}

// Rows written before the push settings were events (migration 00008 gave them version 0) are in
// no stream. They stay what they say until a change recorded in the log replaces them: a rebuild
// carries them over (Model().CreateLike) and the commands ask PreLogDevice and PreLogMute whether
// such a row is the current state of a stream that has no event yet.

// PreLogDevice reports whether user's device is registered by a row older than the log.
func (s *Store) PreLogDevice(ctx context.Context, tenant domain.TenantID, user domain.UserID, deviceID string) (bool, error) {
	return s.exists(ctx, tenant, "SELECT 1 FROM im_push_devices WHERE user_id = ? AND device_id = ? AND version = 0 AND removed_at IS NULL",
		user.Int64(), deviceID)
}

// PreLogMute reports whether user muted topic by a row older than the log.
func (s *Store) PreLogMute(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) (bool, error) {
	return s.exists(ctx, tenant, "SELECT 1 FROM im_push_mutes WHERE topic = ? AND user_id = ? AND version = 0 AND muted = 1",
		topic.String(), user.Int64())
}

func (s *Store) exists(ctx context.Context, tenant domain.TenantID, query string, args ...any) (bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return false, err
	}
	var one int
	err = db.QueryRowContext(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, tenantdb.WrapErr("pushdb: read pre-log row", err)
}
