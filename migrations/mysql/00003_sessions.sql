-- +goose Up
-- Who was online when (DESIGN §5, presence): one row per realtime session, folded from the
-- session's event stream (session.opened.v1, session.closed.v1) by the sessions-mysql projector
-- (readmodels/sessions) and rebuilt from the event store. A session whose node died without
-- closing it has no closed_at: the log has no close event for it. Times are UTC.
CREATE TABLE IF NOT EXISTS im_sessions (
    user_id BIGINT NOT NULL COMMENT '用户 ID',
    session_id VARCHAR(64) NOT NULL COMMENT '连接会话 ID',
    node VARCHAR(64) NOT NULL DEFAULT '' COMMENT '接入节点 node_id',
    user_agent VARCHAR(255) NOT NULL DEFAULT '' COMMENT '客户端 UA（最多 255 字符）',
    opened_at DATETIME(3) NULL COMMENT '登录（上线）时间',
    closed_at DATETIME(3) NULL COMMENT '断开时间；NULL 表示日志中没有断开事件',
    close_reason VARCHAR(64) NOT NULL DEFAULT '' COMMENT 'client_closed/idle_timeout/slow_consumer/shutdown 等',
    version BIGINT NOT NULL COMMENT '会话事件流的最高版本：1 已上线，2 已断开',
    updated_at DATETIME(3) NOT NULL COMMENT '最后一个事件的发生时间',
    PRIMARY KEY (user_id, session_id),
    KEY idx_im_sessions_opened (opened_at),
    KEY idx_im_sessions_closed (closed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE IF EXISTS im_sessions;
