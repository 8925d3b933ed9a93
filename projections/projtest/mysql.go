package projtest

import (
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// MySQL is a set of tenant databases under a unique name prefix, dropped at cleanup.
type MySQL struct {
	t      testing.TB
	prefix string
	// Router finds the tenant databases of the set.
	Router *tenantdb.Router
	// Store is the message store over them.
	Store *msgstore.Store
}

// NewMySQL starts a set of tenant databases for t.
func NewMySQL(t testing.TB) *MySQL {
	t.Helper()
	testenv.MySQLServer(t)
	prefix := testenv.UniqueName("pj")
	testenv.DropMySQLDatabasesAtCleanup(t, prefix)
	m := &MySQL{t: t, prefix: prefix}
	m.Router = m.RouterAt(testenv.MySQLDSN)
	m.Store = msgstore.NewStore(m.Router)
	return m
}

// RouterAt opens another router over the same databases through serverDSN (e.g. a proxy).
func (m *MySQL) RouterAt(serverDSN string) *tenantdb.Router {
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: serverDSN, DatabaseTemplate: m.prefix + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { _ = r.Close() })
	return r
}

// Tenant provisions the database of tenant name.
func (m *MySQL) Tenant(name string) domain.TenantID {
	m.t.Helper()
	tn := domain.MustTenantID(name)
	if err := m.Router.Provision(Ctx(m.t), tn); err != nil {
		m.t.Fatal(err)
	}
	return tn
}

// Counts counts the rows of tn's message tables.
func (m *MySQL) Counts(tn domain.TenantID) msgstore.TableCounts {
	m.t.Helper()
	c, err := m.Store.Counts(Ctx(m.t), tn, msgstore.DefaultTables())
	if err != nil {
		m.t.Fatal(err)
	}
	return c
}

// Page is the first page (up to 1000 messages) of topic's history in tn's database.
func (m *MySQL) Page(tn domain.TenantID, topic domain.Topic) []readmodels.Message {
	m.t.Helper()
	msgs, _, err := m.Store.Page(Ctx(m.t), tn, msgstore.DefaultTables(), msgstore.PageQuery{Topic: topic, Limit: 1000})
	if err != nil {
		m.t.Fatal(err)
	}
	return msgs
}

// Seqs are the seqs of msgs, in order.
func Seqs(msgs []readmodels.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

// BusinessStore returns a business store over m's tenants with its own Redis key prefix.
func (m *MySQL) BusinessStore(t testing.TB) *business.Store {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	biz, err := business.NewStore(m.Router, rdb, business.Config{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return biz
}
