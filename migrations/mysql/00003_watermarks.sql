-- +goose Up
-- Per-topic watermark of the message read model (DESIGN §4, §5): the highest seq W such that
-- every seq up to W is in im_group_messages / im_messages as a message or as a seq-skip marker
-- (status 'skipped'). History and unread answer last_seq = W, never a seq above a hole that may
-- still fill. Written by the projector in the transaction that writes the messages.
CREATE TABLE IF NOT EXISTS im_topic_watermarks (
    topic VARCHAR(64) NOT NULL COMMENT '会话 Topic，grp<群 ID> 或 p2p<小 uid>_<大 uid>',
    watermark BIGINT NOT NULL DEFAULT 0 COMMENT '此序号及以下的每个 seq 都已是消息或终结的空洞',
    updated_at DATETIME(3) NOT NULL,
    PRIMARY KEY (topic)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE IF EXISTS im_topic_watermarks;
