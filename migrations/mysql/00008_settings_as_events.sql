-- +goose Up
-- Push settings and action tokens become read models of their events (DESIGN §7a "Every write an
-- event"): each row keeps the stream version of the last event applied to it, so the projections
-- and the writers that apply an event right after appending it are idempotent, and an older event
-- never undoes a newer one. Rows written before (version 0) are in no stream: a rebuild carries
-- them over until a change recorded in the log replaces them.

-- A removed device keeps its row (a tombstone: token emptied, removed_at set), so that no
-- redelivery of an older registration brings it back; the push worker reads removed_at IS NULL.
ALTER TABLE im_push_devices
    ADD COLUMN version BIGINT NOT NULL DEFAULT 0 COMMENT '设备事件流 user:<uid>/push/device/<device_id> 的版本',
    ADD COLUMN removed_at DATETIME(3) NULL COMMENT '移除时间；非空即已移除';

-- An unmuted conversation keeps its row with muted = 0, for the same reason.
ALTER TABLE im_push_mutes
    ADD COLUMN muted TINYINT(1) NOT NULL DEFAULT 1 COMMENT '1 免打扰，0 已取消',
    ADD COLUMN version BIGINT NOT NULL DEFAULT 0 COMMENT '免打扰事件流 user:<uid>/push/mute/<topic> 的版本',
    ADD COLUMN updated_at DATETIME(3) NULL;

ALTER TABLE im_action_tokens
    ADD COLUMN version BIGINT NOT NULL DEFAULT 0 COMMENT 'token 事件流 atoken:<token_id> 的版本';

-- +goose Down
ALTER TABLE im_action_tokens DROP COLUMN version;
ALTER TABLE im_push_mutes DROP COLUMN updated_at, DROP COLUMN version, DROP COLUMN muted;
ALTER TABLE im_push_devices DROP COLUMN removed_at, DROP COLUMN version;
