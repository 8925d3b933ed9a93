-- +goose Up
-- The login sessions a user lists (account self-service): one row per login session, folded from
-- its stream (user.session_started.v1, user.session_ended.v1), and one row per user holding the
-- cutoff of its account stream (user.banned.v1, user.tokens_revoked.v1, user.password_reset.v1,
-- user.password_changed.v1), so that a session a revocation ended is not listed whatever order the
-- two arrive in. The login-sessions projector (readmodels/login) writes them; `imledger replay
-- --projection login-sessions` rebuilds and verifies them. Times are UTC, to the millisecond.
CREATE TABLE IF NOT EXISTS im_login_sessions (
    user_id BIGINT NOT NULL COMMENT '用户 ID',
    session_id VARCHAR(64) NOT NULL COMMENT '登录会话 ID（token 的 sid）',
    device VARCHAR(64) NOT NULL DEFAULT '' COMMENT '客户端给出的设备名',
    user_agent VARCHAR(256) NOT NULL DEFAULT '' COMMENT '客户端 User-Agent',
    ip_hint VARCHAR(64) NOT NULL DEFAULT '' COMMENT '客户端网段（IPv4 /24 或 IPv6 /48），不存完整地址',
    started_at DATETIME(3) NULL COMMENT 'token 签发时间；NULL 表示尚未收到开始事件',
    expires_at DATETIME(3) NULL COMMENT 'token 过期时间',
    ended_at DATETIME(3) NULL COMMENT '登出时间；NULL 表示未登出',
    end_reason VARCHAR(32) NOT NULL DEFAULT '' COMMENT 'logout / signed_out',
    version BIGINT NOT NULL COMMENT '会话事件流的最高版本：1 已开始，2 已结束',
    PRIMARY KEY (user_id, session_id),
    KEY idx_im_login_sessions_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS im_login_cutoffs (
    user_id BIGINT NOT NULL COMMENT '用户 ID',
    not_before DATETIME(3) NULL COMMENT '早于此时间签发的 token 已失效',
    kept_session VARCHAR(64) NOT NULL DEFAULT '' COMMENT '修改密码时保留的登录会话',
    kept_since DATETIME(3) NULL COMMENT '保留会话自此时间起签发的 token 仍有效',
    version BIGINT NOT NULL COMMENT '账号事件流 user:<uid>/account 已应用的最高版本',
    PRIMARY KEY (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE IF EXISTS im_login_cutoffs;
DROP TABLE IF EXISTS im_login_sessions;
