package pushdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Providers a device may name.
const (
	ProviderJPush   = "jpush"
	ProviderWebhook = "webhook"
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

// Validate checks the device's fields against what the table holds: a *domain.ValidationError
// per bad field, joined. Text that is not UTF-8 or holds a control character (U+0000 included) is
// reason bad_text: MySQL would refuse the one and keep the other, unreadable.
func (d Device) Validate() error {
	var errs []error
	if d.UserID <= 0 {
		errs = append(errs, &domain.ValidationError{Field: "user_id", Reason: "bad_format", Detail: "a positive user id"})
	}
	switch {
	case badText(d.DeviceID):
		errs = append(errs, &domain.ValidationError{Field: "device_id", Reason: domain.ReasonBadText, Detail: "UTF-8 without control characters"})
	case d.DeviceID == "" || len(d.DeviceID) > 64 || strings.ContainsAny(d.DeviceID, " \t\r\n"):
		errs = append(errs, &domain.ValidationError{Field: "device_id", Reason: "bad_format", Detail: "1-64 characters, no spaces"})
	}
	if d.Provider != ProviderJPush && d.Provider != ProviderWebhook {
		errs = append(errs, &domain.ValidationError{Field: "provider", Reason: "bad_value", Detail: "jpush or webhook"})
	}
	if badText(d.Token) {
		errs = append(errs, &domain.ValidationError{Field: "token", Reason: domain.ReasonBadText, Detail: "UTF-8 without control characters"})
	} else if d.Token == "" || len(d.Token) > 256 {
		errs = append(errs, &domain.ValidationError{Field: "token", Reason: "bad_format", Detail: "1-256 characters"})
	}
	if badText(d.Platform) {
		errs = append(errs, &domain.ValidationError{Field: "platform", Reason: domain.ReasonBadText, Detail: "UTF-8 without control characters"})
	} else if len(d.Platform) > 16 {
		errs = append(errs, &domain.ValidationError{Field: "platform", Reason: "too_long", Detail: "at most 16 characters"})
	}
	return errors.Join(errs...)
}

// badText reports whether s is not UTF-8 or holds a control character.
func badText(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl)
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

// Store reads and writes the push tables of each tenant's database. It is safe for concurrent
// use. Errors wrap domain.ErrRetryable when MySQL is unreachable.
type Store struct {
	router *tenantdb.Router
}

// New returns a Store over the tenant databases of router.
func New(router *tenantdb.Router) *Store { return &Store{router: router} }

// PutDevice registers (or replaces) a device's token. Bad fields fail with a
// *domain.ValidationError and write nothing.
func (s *Store) PutDevice(ctx context.Context, tenant domain.TenantID, d Device) error {
	if err := d.Validate(); err != nil {
		return err
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	_, err = db.ExecContext(ctx, "INSERT INTO im_push_devices (user_id, device_id, provider, token, platform, created_at, updated_at)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE provider = VALUES(provider), token = VALUES(token),"+
		" platform = VALUES(platform), updated_at = VALUES(updated_at)",
		int64(d.UserID), d.DeviceID, d.Provider, d.Token, d.Platform, now, now)
	return tenantdb.WrapErr("register device", err)
}

// DeleteDevice removes a device; it reports whether there was one.
func (s *Store) DeleteDevice(ctx context.Context, tenant domain.TenantID, uid domain.UserID, deviceID string) (bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return false, err
	}
	res, err := db.ExecContext(ctx, "DELETE FROM im_push_devices WHERE user_id = ? AND device_id = ?", int64(uid), deviceID)
	if err != nil {
		return false, tenantdb.WrapErr("delete device", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Devices returns the devices of each of users that has any, in one statement per 1,000 users.
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
		" WHERE user_id IN (?"+strings.Repeat(", ?", len(args)-1)+") ORDER BY user_id, device_id", args...)
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

// SetMuted mutes (or unmutes) topic's reminders for uid.
func (s *Store) SetMuted(ctx context.Context, tenant domain.TenantID, topic domain.Topic, uid domain.UserID, muted bool) error {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return err
	}
	if muted {
		_, err = db.ExecContext(ctx, "INSERT IGNORE INTO im_push_mutes (topic, user_id, created_at) VALUES (?, ?, ?)",
			topic.String(), int64(uid), time.Now().UTC())
	} else {
		_, err = db.ExecContext(ctx, "DELETE FROM im_push_mutes WHERE topic = ? AND user_id = ?", topic.String(), int64(uid))
	}
	return tenantdb.WrapErr("set muted", err)
}

// MutedUsers returns the users who muted topic.
func (s *Store) MutedUsers(ctx context.Context, tenant domain.TenantID, topic domain.Topic) (map[domain.UserID]bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT user_id FROM im_push_mutes WHERE topic = ?", topic.String())
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
