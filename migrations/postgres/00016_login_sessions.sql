-- Login sessions (account self-service): what the account guard of every node needs to refuse a
-- revoked session's token, written in the statement that appends the event deciding it, as
-- account_status is. The events are the record; these rows are the guard's snapshot of them.

-- +goose Up

-- A password change keeps the session it was made from: its tokens issued at or after
-- kept_since pass though they predate not_before (domain.TokenCutoff).
ALTER TABLE account_status
    ADD COLUMN kept_session text NULL,
    ADD COLUMN kept_since   timestamptz NULL;

-- One row per login session that was signed out (user.session_ended.v1) and whose token has not
-- expired: every node refuses its token. A row past expires_at is of no use (the token is
-- refused as expired) and the guards delete it.
CREATE TABLE revoked_sessions (
    tenant_id   text        NOT NULL,
    user_id     bigint      NOT NULL CHECK (user_id > 0),
    session_id  text        NOT NULL,
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, user_id, session_id)
);
CREATE INDEX revoked_sessions_expires ON revoked_sessions (expires_at);

-- +goose Down
DROP TABLE revoked_sessions;
ALTER TABLE account_status DROP COLUMN kept_since, DROP COLUMN kept_session;
