package pushdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Providers a device may name.
const (
	ProviderJPush   = domain.PushProviderJPush
	ProviderWebhook = domain.PushProviderWebhook
)

// Device is a device token a user registered.
type Device struct {
	UserID   domain.UserID
	DeviceID string
	Provider string
	Token    string
	Platform string
	// UpdatedAt is when the token was last registered.
	UpdatedAt time.Time
}

// Validate checks the device's fields as domain.PushDeviceRegistered.Validate does: a
// *domain.ValidationError per bad field, joined.
func (d Device) Validate() error {
	return domain.PushDeviceRegistered{User: d.UserID, DeviceID: d.DeviceID, Provider: d.Provider, Token: d.Token,
		Platform: d.Platform}.Validate()
}

// LogEntry is one reminder delivered to one device, or given up on.
type LogEntry struct {
	UserID   domain.UserID
	DeviceID string
	Provider string
	Topic    string
	Seq      int64
	Count    int
	Attempts int
	Sent     bool
	Error    string
	At       time.Time
}

// Store reads and writes the push tables of each tenant's database: the devices and mutes that
// the push-settings projection folds from the push events (ApplyBatch), and the reminder log the
// push worker writes. It is safe for concurrent use. Errors wrap domain.ErrRetryable when MySQL is
// unreachable.
type Store struct {
	router *tenantdb.Router
}

// New returns a Store over the tenant databases of router.
func New(router *tenantdb.Router) *Store { return &Store{router: router} }

// Devices returns the registered (not removed) devices of each of users that has any, in one
// statement per 1,000 users.
func (s *Store) Devices(ctx context.Context, tenant domain.TenantID, users []domain.UserID) (map[domain.UserID][]Device, error) {
	out := map[domain.UserID][]Device{}
	if len(users) == 0 {
		return out, nil
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(users); start += 1000 {
		chunk := users[start:min(start+1000, len(users))]
		args := make([]any, len(chunk))
		for i, u := range chunk {
			args[i] = int64(u)
		}
		if err := s.readDevices(ctx, db, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) readDevices(ctx context.Context, db *sql.DB, args []any, out map[domain.UserID][]Device) error {
	rows, err := db.QueryContext(ctx, "SELECT user_id, device_id, provider, token, platform, updated_at FROM im_push_devices"+
		" WHERE user_id IN (?"+strings.Repeat(", ?", len(args)-1)+") AND removed_at IS NULL ORDER BY user_id, device_id", args...)
	if err != nil {
		return tenantdb.WrapErr("read devices", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d Device
		var uid int64
		if err := rows.Scan(&uid, &d.DeviceID, &d.Provider, &d.Token, &d.Platform, &d.UpdatedAt); err != nil {
			return tenantdb.WrapErr("read devices", err)
		}
		d.UserID = domain.UserID(uid)
		out[d.UserID] = append(out[d.UserID], d)
	}
	return tenantdb.WrapErr("read devices", rows.Err())
}

// MutedUsers returns the users who muted topic (and did not unmute it since).
func (s *Store) MutedUsers(ctx context.Context, tenant domain.TenantID, topic domain.Topic) (map[domain.UserID]bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT user_id FROM im_push_mutes WHERE topic = ? AND muted = 1", topic.String())
	if err != nil {
		return nil, tenantdb.WrapErr("read mutes", err)
	}
	defer rows.Close()
	out := map[domain.UserID]bool{}
	for rows.Next() {
		var uid int64
		if err := rows.Scan(&uid); err != nil {
			return nil, tenantdb.WrapErr("read mutes", err)
		}
		out[domain.UserID(uid)] = true
	}
	return out, tenantdb.WrapErr("read mutes", rows.Err())
}

// AppendLog records reminders, 500 rows per statement.
func (s *Store) AppendLog(ctx context.Context, tenant domain.TenantID, entries []LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return err
	}
	for start := 0; start < len(entries); start += 500 {
		chunk := entries[start:min(start+500, len(entries))]
		args := make([]any, 0, 11*len(chunk))
		for _, e := range chunk {
			status := "failed"
			if e.Sent {
				status = "sent"
			}
			// A provider's answer quoted in the error may be any bytes: MySQL refuses a row (and
			// with it the chunk) whose text is not UTF-8.
			errText := readmodels.FitChars(e.Error, 512)
			args = append(args, int64(e.UserID), e.DeviceID, e.Provider, e.Topic, e.Seq, e.Count, e.Attempts, status, errText, e.At.UTC())
		}
		q := "INSERT INTO im_push_log (user_id, device_id, provider, topic, seqid, message_count, attempts, status, error, created_at) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?), ", len(chunk)), ", ")
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return tenantdb.WrapErr(fmt.Sprintf("record %d reminders", len(chunk)), err)
		}
	}
	return nil
}

// Log returns uid's most recent reminders, newest first, at most limit.
func (s *Store) Log(ctx context.Context, tenant domain.TenantID, uid domain.UserID, limit int) ([]LogEntry, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT device_id, provider, topic, seqid, message_count, attempts, status, error, created_at"+
		" FROM im_push_log WHERE user_id = ? ORDER BY id DESC LIMIT ?", int64(uid), limit)
	if err != nil {
		return nil, tenantdb.WrapErr("read push log", err)
	}
	defer rows.Close()
	var out []LogEntry
	for rows.Next() {
		e := LogEntry{UserID: uid}
		var status string
		if err := rows.Scan(&e.DeviceID, &e.Provider, &e.Topic, &e.Seq, &e.Count, &e.Attempts, &status, &e.Error, &e.At); err != nil {
			return nil, tenantdb.WrapErr("read push log", err)
		}
		e.Sent = status == "sent"
		out = append(out, e)
	}
	return out, tenantdb.WrapErr("read push log", rows.Err())
}
