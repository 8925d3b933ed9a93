-- +goose Up
-- Final states of the short-lived security state kept hot in Redis (DESIGN §5, §5a): verification
-- codes and one-time action tokens. Redis answers the hot path; these rows are the audit record
-- and, for action tokens, the final word on whether a token was consumed.

-- One row per verification code issued. The phone number or e-mail address is never stored: only
-- its keyed hash (HMAC-SHA-256 under the node's configured key). The code itself is never stored.
CREATE TABLE IF NOT EXISTS im_verification_codes (
    code_id CHAR(36) NOT NULL COMMENT '验证码 ID (UUIDv7)',
    scene VARCHAR(32) NOT NULL COMMENT 'register / login / reset_password / change_phone',
    target_hash CHAR(64) NOT NULL COMMENT '手机号或邮箱的 HMAC-SHA-256，十六进制',
    channel VARCHAR(8) NOT NULL COMMENT 'sms / email',
    state VARCHAR(16) NOT NULL COMMENT 'issued / consumed / expired / locked / superseded',
    attempts INT NOT NULL DEFAULT 0 COMMENT '错误尝试次数',
    created_at DATETIME(3) NOT NULL,
    expires_at DATETIME(3) NOT NULL,
    finished_at DATETIME(3) NULL COMMENT '进入终态的时间',
    PRIMARY KEY (code_id),
    KEY idx_scene_target_state (scene, target_hash, state),
    KEY idx_state_expires (state, expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row per action token. Only the SHA-256 of the token is stored. The conditional UPDATE from
-- active to consumed is the final word: exactly one consumer wins however many race.
CREATE TABLE IF NOT EXISTS im_action_tokens (
    token_hash CHAR(64) NOT NULL COMMENT 'token 的 SHA-256，十六进制',
    token_id CHAR(36) NOT NULL COMMENT 'token ID (UUIDv7)，审计和撤销用',
    action VARCHAR(32) NOT NULL COMMENT 'reset_password / join_group / enterprise_login',
    subject VARCHAR(128) NOT NULL COMMENT '动作对象，如群 Topic 或用户 ID',
    state VARCHAR(16) NOT NULL COMMENT 'active / consumed / revoked',
    created_by BIGINT NOT NULL DEFAULT 0 COMMENT '签发者 uid，0 为系统',
    consumed_by BIGINT NULL COMMENT '消费者 uid',
    created_at DATETIME(3) NOT NULL,
    expires_at DATETIME(3) NOT NULL,
    finished_at DATETIME(3) NULL COMMENT '消费或撤销的时间',
    PRIMARY KEY (token_hash),
    UNIQUE KEY uk_token_id (token_id),
    KEY idx_action_subject (action, subject)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE IF EXISTS im_action_tokens;
DROP TABLE IF EXISTS im_verification_codes;
