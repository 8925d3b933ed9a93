// Package business is the read model of groups, memberships, relations and public user profiles.
// Apply folds business events into MySQL tables per tenant (im_groups, im_group_members,
// im_relations, im_users) in one transaction, skipping stream versions a row already holds, so
// every write is idempotent by itself. Queries read the seed 000 §5.2 Redis caches first and
// refill them from MySQL on a miss; after each commit the entries that changed are invalidated
// with a fenced delete, never updated in place, so a Redis flush or outage costs misses, never a
// wrong answer.
package business
