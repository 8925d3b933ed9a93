-- +goose Up
-- Tenant read models for groups, memberships, relations and public user profiles (DESIGN §5,
-- seed 000 §5.2). Written only by the business projector (readmodels/business), rebuilt from the
-- event store. Every row carries the version of the event stream it was folded from, so a
-- redelivered or replayed event (version <= stored) changes nothing. Times are UTC.

-- One row per group, folded from the group stream "group:<gid>".
CREATE TABLE IF NOT EXISTS im_groups (
    group_id BIGINT NOT NULL COMMENT '业务群 ID',
    topic VARCHAR(64) NOT NULL COMMENT '群 Topic，grp<group_id>',
    name VARCHAR(64) NOT NULL COMMENT '群名',
    avatar VARCHAR(512) NOT NULL DEFAULT '' COMMENT '群头像 URL 或存储 key',
    intro VARCHAR(512) NOT NULL DEFAULT '' COMMENT '群简介',
    owner_id BIGINT NOT NULL COMMENT '群主用户 ID',
    join_approval TINYINT(1) NOT NULL DEFAULT 0 COMMENT '入群是否需要审批',
    invite_policy VARCHAR(16) NOT NULL DEFAULT 'member' COMMENT '可邀请的最低角色 owner/admin/member',
    announce_policy VARCHAR(16) NOT NULL DEFAULT 'admin' COMMENT '可发公告的最低角色 owner/admin/member',
    mute_all TINYINT(1) NOT NULL DEFAULT 0 COMMENT '全员禁言（群主和管理员除外）',
    announcement TEXT NULL COMMENT '群公告，NULL 表示没有',
    member_count INT NOT NULL DEFAULT 0 COMMENT '当前成员数；解散后为 0',
    status VARCHAR(16) NOT NULL DEFAULT 'normal' COMMENT 'normal/dissolved',
    version BIGINT NOT NULL COMMENT '群事件流版本',
    created_at DATETIME(3) NOT NULL,
    updated_at DATETIME(3) NOT NULL COMMENT '最后一个事件的发生时间',
    PRIMARY KEY (group_id),
    KEY idx_im_groups_owner (owner_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row per (group, user) that ever had a membership, folded from the membership stream
-- "member:<gid>:<uid>". role is '' for non-members. Members of a dissolved group keep their rows;
-- queries hide them through im_groups.status.
CREATE TABLE IF NOT EXISTS im_group_members (
    group_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    role VARCHAR(16) NOT NULL DEFAULT '' COMMENT 'owner/admin/member；非成员为空',
    status VARCHAR(16) NOT NULL COMMENT 'member/left/removed/invited/requested/rejected',
    muted_until DATETIME(3) NULL COMMENT '禁言截止时间，NULL 表示未禁言',
    banned TINYINT(1) NOT NULL DEFAULT 0 COMMENT '被移出并拉黑，解封前不能再入群',
    invited_by BIGINT NOT NULL DEFAULT 0 COMMENT '待处理邀请的邀请人',
    request_message VARCHAR(256) NOT NULL DEFAULT '' COMMENT '待处理入群申请的附言',
    joined_at DATETIME(3) NULL COMMENT '最近一次入群时间',
    version BIGINT NOT NULL COMMENT '成员事件流版本',
    updated_at DATETIME(3) NOT NULL COMMENT '最后一个事件的发生时间',
    PRIMARY KEY (group_id, user_id),
    KEY idx_im_group_members_list (group_id, status, role, user_id),
    KEY idx_im_group_members_user (user_id, status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Relations, one row per direction: (user_id, peer_id) is user_id's side of the relation stream
-- "relation:<lo>:<hi>", and both rows of a pair are written in one transaction with the same
-- version. friend is symmetric; blocked means user_id blocks peer_id; request is '' (none), 'sent'
-- (user_id asked peer_id) or 'received' (peer_id asked user_id). A row per direction makes
-- "my friends" and "my blocklist" one index range each.
CREATE TABLE IF NOT EXISTS im_relations (
    user_id BIGINT NOT NULL,
    peer_id BIGINT NOT NULL,
    friend TINYINT(1) NOT NULL DEFAULT 0 COMMENT '是否好友（双向一致）',
    blocked TINYINT(1) NOT NULL DEFAULT 0 COMMENT 'user_id 是否拉黑 peer_id',
    request VARCHAR(16) NOT NULL DEFAULT '' COMMENT '待处理好友申请：空/sent/received',
    request_message VARCHAR(256) NOT NULL DEFAULT '' COMMENT '好友申请附言',
    friends_since DATETIME(3) NULL,
    version BIGINT NOT NULL COMMENT '关系事件流版本',
    updated_at DATETIME(3) NOT NULL COMMENT '最后一个事件的发生时间',
    PRIMARY KEY (user_id, peer_id),
    KEY idx_im_relations_friends (user_id, friend, peer_id),
    KEY idx_im_relations_blocked (user_id, blocked, peer_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Public user profiles, folded from "user:<uid>". Never credentials or verification data.
CREATE TABLE IF NOT EXISTS im_users (
    user_id BIGINT NOT NULL,
    nickname VARCHAR(32) NOT NULL,
    avatar VARCHAR(512) NOT NULL DEFAULT '',
    signature VARCHAR(128) NOT NULL DEFAULT '' COMMENT '状态签名',
    version BIGINT NOT NULL COMMENT '资料事件流版本',
    updated_at DATETIME(3) NOT NULL COMMENT '最后一个事件的发生时间',
    PRIMARY KEY (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE IF EXISTS im_users;
DROP TABLE IF EXISTS im_relations;
DROP TABLE IF EXISTS im_group_members;
DROP TABLE IF EXISTS im_groups;
