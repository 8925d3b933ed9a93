-- +goose Up
-- The users who block a user, as one range of an index: a session on its user's channel (the
-- WebSocket "me" topic) reads them when it subscribes, because a blocker's new 1:1 messages do
-- not reach the blocked user's channel. Rows of im_relations are per direction, so "whom do I
-- block" is idx_im_relations_blocked and "who blocks me" needs this one.
ALTER TABLE im_relations ADD INDEX idx_im_relations_blocked_by (peer_id, blocked, user_id);

-- +goose Down
ALTER TABLE im_relations DROP INDEX idx_im_relations_blocked_by;
