-- +goose Up
-- Offline push and files (seed 000 "离线 Push 口子", seed 004 §6.4). Written by the push worker,
-- the push REST endpoints and the file service; none of it is needed to store or read messages.

-- Device tokens a user registered for offline reminders. provider names a configured provider
-- (jpush or webhook); a token belongs to one device of one user.
CREATE TABLE IF NOT EXISTS im_push_devices (
    user_id BIGINT NOT NULL,
    device_id VARCHAR(64) NOT NULL COMMENT '客户端设备 ID',
    provider VARCHAR(16) NOT NULL COMMENT 'jpush/webhook',
    token VARCHAR(256) NOT NULL COMMENT '厂商 registration id 或 webhook 设备标识',
    platform VARCHAR(16) NOT NULL DEFAULT '' COMMENT 'ios/android/web/...',
    created_at DATETIME(3) NOT NULL,
    updated_at DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, device_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Conversations a user muted for reminders (免打扰): no reminder unless the user is @mentioned.
CREATE TABLE IF NOT EXISTS im_push_mutes (
    topic VARCHAR(64) NOT NULL,
    user_id BIGINT NOT NULL,
    created_at DATETIME(3) NOT NULL,
    PRIMARY KEY (topic, user_id),
    KEY idx_im_push_mutes_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row per reminder the worker tried to deliver to one device: how many attempts it took and
-- whether it was sent or failed for good (the failure record of seed 000 "Push 失败需要记录").
CREATE TABLE IF NOT EXISTS im_push_log (
    id BIGINT NOT NULL AUTO_INCREMENT,
    user_id BIGINT NOT NULL,
    device_id VARCHAR(64) NOT NULL,
    provider VARCHAR(16) NOT NULL,
    topic VARCHAR(64) NOT NULL COMMENT '提醒中最新一条消息的 Topic',
    seqid BIGINT NOT NULL COMMENT '提醒中最新一条消息的 seq',
    message_count INT NOT NULL COMMENT '本次合并提醒包含的消息数',
    attempts INT NOT NULL,
    status VARCHAR(16) NOT NULL COMMENT 'sent/failed',
    error VARCHAR(512) NOT NULL DEFAULT '',
    created_at DATETIME(3) NOT NULL,
    PRIMARY KEY (id),
    KEY idx_im_push_log_user (user_id, created_at),
    KEY idx_im_push_log_status (status, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- File records: metadata first (status 'pending'), then the bytes in object storage
-- ('uploaded'), the security check (audit_status), and deletion by the collector ('deleted').
CREATE TABLE IF NOT EXISTS im_files (
    file_id CHAR(36) NOT NULL COMMENT 'UUIDv7',
    uploader_id BIGINT NOT NULL,
    name VARCHAR(255) NOT NULL,
    content_type VARCHAR(128) NOT NULL,
    size BIGINT NOT NULL COMMENT '声明的字节数；上传完成后为实际字节数',
    object_key VARCHAR(255) NOT NULL COMMENT '对象存储 key',
    sha256 CHAR(64) NOT NULL DEFAULT '',
    status VARCHAR(16) NOT NULL COMMENT 'pending/uploaded/deleted',
    audit_status VARCHAR(16) NOT NULL DEFAULT 'pending' COMMENT 'pending/approved/rejected',
    audit_reason VARCHAR(128) NOT NULL DEFAULT '',
    ref_count INT NOT NULL DEFAULT 0,
    version BIGINT NOT NULL COMMENT '文件事件流 file:<file_id> 的版本',
    created_at DATETIME(3) NOT NULL,
    uploaded_at DATETIME(3) NULL,
    audited_at DATETIME(3) NULL,
    deleted_at DATETIME(3) NULL,
    PRIMARY KEY (file_id),
    KEY idx_im_files_gc (status, ref_count, created_at),
    KEY idx_im_files_uploader (uploader_id, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- References from messages to files (seed 000 §6.3: 群消息附件同步登记到 im_group_files，
-- 记录 source_topic/source_seq). group_id is 0 for a 1:1 conversation. A file with a reference is
-- never collected.
CREATE TABLE IF NOT EXISTS im_group_files (
    id BIGINT NOT NULL AUTO_INCREMENT,
    group_id BIGINT NOT NULL DEFAULT 0,
    file_id CHAR(36) NOT NULL,
    source_topic VARCHAR(64) NOT NULL,
    source_seq BIGINT NOT NULL,
    created_by BIGINT NOT NULL,
    created_at DATETIME(3) NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_im_group_files_source (source_topic, source_seq, file_id),
    KEY idx_im_group_files_file (file_id),
    KEY idx_im_group_files_group (group_id, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE IF EXISTS im_group_files;
DROP TABLE IF EXISTS im_files;
DROP TABLE IF EXISTS im_push_log;
DROP TABLE IF EXISTS im_push_mutes;
DROP TABLE IF EXISTS im_push_devices;
