package query

import (
	"log/slog"

	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// Message is one message of a history page.
type Message = readmodels.Message

// Reader answers history and unread queries. It is safe for concurrent use.
type Reader struct {
	store  *msgstore.Store
	hot    *hot.Store
	tables msgstore.Tables
	log    *slog.Logger
}

// NewReader returns a Reader over the MySQL store and, if hotStore is not nil, the Redis cache.
// logger receives a warning each time Redis fails and a query falls back to MySQL; nil discards.
func NewReader(store *msgstore.Store, hotStore *hot.Store, logger *slog.Logger) *Reader {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reader{store: store, hot: hotStore, tables: msgstore.DefaultTables(), log: logger}
}
