-- +goose Up
-- im_processed_events recorded every applied event id per consumer group, in the same
-- transaction as the read-model write, to skip redeliveries. Every read-model write is
-- idempotent by itself (unique keys, stream-version guards, read marks that only move forward),
-- so the table protected nothing and only grew. The projectors no longer write it.
DROP TABLE IF EXISTS im_processed_events;

-- +goose Down
CREATE TABLE IF NOT EXISTS im_processed_events (
    consumer_group VARCHAR(128) NOT NULL,
    event_id BINARY(16) NOT NULL,
    processed_at DATETIME(3) NOT NULL,
    PRIMARY KEY (consumer_group, event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
