// Package readmodels holds what the read-side stores share: the Message a history query returns,
// whichever store (MySQL per tenant or the Redis hot cache) it came from. The stores live in the
// sub-packages tenantdb, msgstore and hot; query answers transport's questions from them.
package readmodels
