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

-- The watermarks of the topics that have messages already: the end of the run of seqs that starts
-- at 1. A topic with an older hole stops below it until the relay gives the hole up.
INSERT INTO im_topic_watermarks (topic, watermark, updated_at)
SELECT a.topic, MIN(a.seqid), NOW(3) FROM im_group_messages a
WHERE NOT EXISTS (SELECT 1 FROM im_group_messages b WHERE b.topic = a.topic AND b.seqid = a.seqid + 1)
  AND EXISTS (SELECT 1 FROM im_group_messages c WHERE c.topic = a.topic AND c.seqid = 1)
GROUP BY a.topic
ON DUPLICATE KEY UPDATE watermark = GREATEST(watermark, VALUES(watermark));

INSERT INTO im_topic_watermarks (topic, watermark, updated_at)
SELECT a.topic, MIN(a.seqid), NOW(3) FROM im_messages a
WHERE NOT EXISTS (SELECT 1 FROM im_messages b WHERE b.topic = a.topic AND b.seqid = a.seqid + 1)
  AND EXISTS (SELECT 1 FROM im_messages c WHERE c.topic = a.topic AND c.seqid = 1)
GROUP BY a.topic
ON DUPLICATE KEY UPDATE watermark = GREATEST(watermark, VALUES(watermark));

-- +goose Down
DROP TABLE IF EXISTS im_topic_watermarks;
