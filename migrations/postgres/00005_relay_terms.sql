-- Relay leadership terms and broker bookkeeping (DESIGN §4, Relay). Each relay that takes the
-- advisory lock starts a new term; only the current term may move the checkpoint or append seq
-- skip markers, so a deposed relay whose lock session died cannot move the checkpoint back.

-- +goose Up
ALTER TABLE relay_checkpoints
    -- Incremented by every relay that becomes active under this name.
    ADD COLUMN term            bigint NOT NULL DEFAULT 0,
    -- The Kafka cluster id the relay last published to; '' until first seen.
    ADD COLUMN cluster_id      text   NOT NULL DEFAULT '',
    -- Set while the relay republishes events it had published to a broker that lost them: how
    -- far the republish has come. The checkpoint itself never moves back.
    ADD COLUMN replay_tx_id    xid8   NULL,
    ADD COLUMN replay_position bigint NULL,
    -- Set once the relay has given up, with seq-skip markers, every hole the conversations had
    -- before markers existed (a one-time sweep of the whole history).
    ADD COLUMN holes_swept     boolean NOT NULL DEFAULT false;

-- Per relay and partition: the offset after the last record the broker acknowledged. A broker
-- whose end offset is below it has lost acknowledged records.
CREATE TABLE relay_partition_offsets (
    name        text    NOT NULL REFERENCES relay_checkpoints (name) ON DELETE CASCADE,
    topic       text    NOT NULL,
    partition   integer NOT NULL,
    next_offset bigint  NOT NULL,
    PRIMARY KEY (name, topic, partition)
);

-- +goose Down
DROP TABLE relay_partition_offsets;
ALTER TABLE relay_checkpoints
    DROP COLUMN holes_swept,
    DROP COLUMN replay_position,
    DROP COLUMN replay_tx_id,
    DROP COLUMN cluster_id,
    DROP COLUMN term;
