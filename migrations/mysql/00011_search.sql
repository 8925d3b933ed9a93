-- +goose Up
-- Search and discovery in the business read model (readmodels/business). im_users gains the
-- login name (from user.registered.v1, in the form domain.NewLogin gives it: ASCII lower case,
-- compared byte for byte) and whether search finds the user (user.discoverable_set.v1; a user who
-- never chose is found); im_groups whether search finds the group (group settings, discoverable).
-- Each search is one range of an index that starts with the flag: the users or groups search
-- may find, by login, nickname or name prefix. Nicknames and names compare with the tables'
-- utf8mb4_unicode_ci: a prefix matches regardless of case and accents ("ali" finds "Álice").
-- Rows projected before this migration have no login (empty) until the read model is rebuilt
-- (imledger replay --projection business-mysql).
ALTER TABLE im_users
    ADD COLUMN login VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '' COMMENT '登录名（小写 ASCII）' AFTER user_id,
    ADD COLUMN discoverable TINYINT(1) NOT NULL DEFAULT 1 COMMENT '他人搜索能否找到' AFTER signature,
    ADD INDEX idx_im_users_login (discoverable, login, user_id),
    ADD INDEX idx_im_users_nickname (discoverable, nickname, user_id);

ALTER TABLE im_groups
    ADD COLUMN discoverable TINYINT(1) NOT NULL DEFAULT 0 COMMENT '公开群：按名称可被搜索' AFTER mute_all,
    ADD INDEX idx_im_groups_name (discoverable, name, group_id);

-- +goose Down
ALTER TABLE im_groups DROP INDEX idx_im_groups_name, DROP COLUMN discoverable;
ALTER TABLE im_users DROP INDEX idx_im_users_nickname, DROP INDEX idx_im_users_login, DROP COLUMN discoverable, DROP COLUMN login;
