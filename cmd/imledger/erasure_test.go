package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/replay/export"
)

// The plaintexts the erasure test looks for: what the erased user wrote and said about themselves,
// and what another user wrote, which must stay.
const (
	erasedText  = "zq-alice-secret"
	erasedNick  = "Zqalicenick"
	erasedPhone = "13912345678"
	keptText    = "zq-bob-keeps"
)

// erasureEnv is a node with its own shred key, an embedded broker the test reads, and a
// verification gateway that hands the test its codes.
type erasureEnv struct {
	env   *serveEnv
	s     *served
	codes chan string
}

func startErasureEnv(t *testing.T) *erasureEnv {
	t.Helper()
	codes := make(chan string, 8)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Code string `json:"code"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad delivery", http.StatusBadRequest)
			return
		}
		codes <- body.Code
	}))
	t.Cleanup(gw.Close)
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	env := newServeEnv(t, nil, true)
	env.embeddedAddr = freeAddr(t)
	env.extra = fmt.Sprintf("verify: {hash_key: \"a test key of 32 bytes, not secret\", gateway_url: %q}\nshred: {local_key: %q}",
		gw.URL, base64.StdEncoding.EncodeToString(key))
	return &erasureEnv{env: env, s: env.start(t, "erasure"), codes: codes}
}

// bindPhone binds erasedPhone to u's account through a change_phone code.
func (e *erasureEnv) bindPhone(t *testing.T, u user) {
	t.Helper()
	target := `{"tenant":"demo","scene":"change_phone","phone":"+86` + erasedPhone + `"}`
	if a := call(t, http.MethodPost, e.s.base+"/v1/im/verify/codes", u.token, "", target); a.status != http.StatusCreated {
		t.Fatalf("create code: %d %s", a.status, a.raw)
	}
	code := <-e.codes
	body := fmt.Sprintf(`{"password":"correct horse battery","phone":"+86%s","code":%q}`, erasedPhone, code)
	if a := call(t, http.MethodPut, e.s.base+"/v1/im/account/contact", u.token, "", body); a.status != http.StatusOK {
		t.Fatalf("bind phone: %d %s", a.status, a.raw)
	}
}

// sendMany sends n messages of text prefix from u, spread over topics, eight at a time.
func sendMany(t *testing.T, base string, u user, topics []string, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			topic := topics[i%len(topics)]
			content := fmt.Sprintf(`{"text":"%s %d"}`, prefix, i)
			if i%2 == 0 {
				content = fmt.Sprintf(`"%s %d"`, prefix, i)
			}
			// The client message id is a clear routing field: it must not carry the text.
			if a := sendREST(t, base, u, topic, fmt.Sprintf("m-%s-%d", u.id, i), content); a.status/100 != 2 {
				errs <- fmt.Sprintf("send %d to %s: %d %s", i, topic, a.status, a.raw)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestErasureLeavesNoPlaintextAnywhere: a user who sent 1,000 messages in groups and 1:1 chats,
// with a nickname, a phone number and an uploaded file, erases their account. Afterwards none of it is found in
// any PostgreSQL table, any record of any Kafka topic, any MySQL table, any Redis key, or a JSONL
// or Parquet export; another user's messages are intact; a rebuild verifies against the live read
// models; the erased user's token is refused and the login name is free again.
func TestErasureLeavesNoPlaintextAnywhere(t *testing.T) {
	t.Parallel()
	e := startErasureEnv(t)
	base := e.s.base
	alice, bob, carol := signUp(t, base, "alice"), signUp(t, base, "bob"), signUp(t, base, "carol")
	if a := call(t, http.MethodPatch, base+"/v1/im/users/me", alice.token, "nick", `{"nickname":"`+erasedNick+`"}`); a.status != http.StatusOK {
		t.Fatalf("set nickname: %d %s", a.status, a.raw)
	}
	e.bindPhone(t, alice)
	if a := call(t, http.MethodPost, base+"/v1/im/files", alice.token, "file-1",
		`{"name":"`+erasedText+`.txt","content_type":"text/plain","size":"5"}`); a.status != http.StatusCreated {
		t.Fatalf("create a file: %d %s", a.status, a.raw)
	}
	var topics []string
	for i := range 3 {
		gid := createGroup(t, base, bob, fmt.Sprintf("room-%d", i))
		joinGroup(t, base, alice, gid)
		joinGroup(t, base, carol, gid)
		topics = append(topics, "grp"+gid)
	}
	topics = append(topics, directTopicOf(alice.id, bob.id), directTopicOf(alice.id, carol.id))
	sendMany(t, base, alice, topics, erasedText, 999)
	sendMany(t, base, bob, topics[:4], keptText, 20)
	editOne(t, base, alice, topics[0])

	mysqlDB := openTenantMySQL(t, e.env)
	waitCount(t, "alice's projected messages", 1000, func() int { return countMessages(t, mysqlDB, erasedText) })
	waitCount(t, "bob's projected messages", 20, func() int { return countMessages(t, mysqlDB, keptText) })
	// The searches below can find plaintext: the read models hold it before the erasure, the
	// event log never does.
	if n := searchMySQL(t, mysqlDB, erasedNick); n == 0 {
		t.Fatal("the nickname is not in MySQL before the erasure: the search would prove nothing")
	}
	if n := searchRedis(t, e.env.prefix, erasedText); n == 0 {
		t.Fatal("no hot message in Redis before the erasure: the search would prove nothing")
	}
	if n := searchPostgres(t, e.env.dbURL, "events", erasedText, erasedNick); n != 0 {
		t.Fatalf("%d events hold plaintext before the erasure: content is not sealed at write", n)
	}

	if a := call(t, http.MethodPost, base+"/v1/im/account/delete", alice.token, "", `{"password":"correct horse battery"}`); a.status != http.StatusOK {
		t.Fatalf("delete my account: %d %s", a.status, a.raw)
	}
	waitCount(t, "alice's messages still in clear in MySQL", 0, func() int { return countMessages(t, mysqlDB, erasedText) })
	waitCount(t, "alice's hot messages still in clear in Redis", 0, func() int { return searchRedis(t, e.env.prefix, erasedText) })
	waitCount(t, "MySQL rows still holding alice's text (messages, file names)", 0, func() int { return searchMySQL(t, mysqlDB, erasedText) })

	dir := t.TempDir()
	jsonl, pq := filepath.Join(dir, "demo.jsonl"), filepath.Join(dir, "demo.parquet")
	for _, args := range [][]string{{"--format", "jsonl", "--out", jsonl}, {"--format", "parquet", "--out", pq}} {
		if out, errOut, err := runCLI(t, append([]string{"export", "--config", e.s.file, "--tenant", "demo"}, args...)...); err != nil {
			t.Fatalf("export %v: %v\n%s\n%s", args, err, out, errOut)
		}
	}
	exported := readExports(t, jsonl, pq)
	for _, secret := range []string{erasedText, erasedNick, erasedPhone} {
		if n := searchPostgres(t, e.env.dbURL, "", secret); n != 0 {
			t.Errorf("%q: %d PostgreSQL rows", secret, n)
		}
		if n := searchKafka(t, e.env.embeddedAddr, secret); n != 0 {
			t.Errorf("%q: %d Kafka records", secret, n)
		}
		if n := searchMySQL(t, mysqlDB, secret); n != 0 {
			t.Errorf("%q: %d MySQL rows", secret, n)
		}
		if n := searchRedis(t, e.env.prefix, secret); n != 0 {
			t.Errorf("%q: %d Redis keys", secret, n)
		}
		if n := strings.Count(exported, secret); n != 0 {
			t.Errorf("%q: %d times in the exports", secret, n)
		}
	}
	if n := countMessages(t, mysqlDB, keptText); n != 20 {
		t.Errorf("bob's messages in MySQL after the erasure: %d, want 20", n)
	}
	if n := strings.Count(exported, keptText); n != 2*20 {
		t.Errorf("bob's messages in the exports: %d, want 20 in each", n)
	}
	if n := countMessages(t, mysqlDB, `$erased`); n != 1000 {
		t.Errorf("messages showing the erased marker: %d, want alice's 1000", n)
	}
	for _, p := range []string{"messages-mysql", "messages-hot", "business-mysql", "files-refs"} {
		if out, errOut, err := runCLI(t, "replay", "--config", e.s.file, "--projection", p, "--verify"); err != nil {
			t.Errorf("replay --verify %s after the erasure: %v\n%s\n%s", p, err, out, errOut)
		}
	}
	// An erased account is refused as a banned one is, on every node (user.erased.v1 folds so).
	if a := call(t, http.MethodGet, base+"/v1/im/users/me", alice.token, "", ""); a.status != http.StatusForbidden || a.Reason != "user_banned" {
		t.Errorf("the erased user's token: %d %s, want 403 user_banned", a.status, a.raw)
	}
	if again := signUp(t, base, "alice"); again.id == alice.id {
		t.Errorf("the freed login name gave back the erased account %s", alice.id)
	}
}

// editOne sends a message of u to topic and edits it: the edit's content is sealed too.
func editOne(t *testing.T, base string, u user, topic string) {
	t.Helper()
	a := sendREST(t, base, u, topic, "m-"+u.id+"-edited", `"draft"`)
	seq, _ := a.Data["seq"].(string)
	if a.status/100 != 2 || seq == "" {
		t.Fatalf("send: %d %s", a.status, a.raw)
	}
	body := `{"version":"1","content":{"text":"` + erasedText + ` edited"}}`
	if a := call(t, http.MethodPatch, base+"/v1/im/topics/"+topic+"/messages/"+seq, u.token, "edit-"+seq, body); a.status != http.StatusOK {
		t.Fatalf("edit: %d %s", a.status, a.raw)
	}
}

// TestAdminEraseCutsTheUserOff: the admin command user.erase, signed like every admin command,
// erases a user as their own request does: their messages and nickname read as erased, another
// user's messages stay, and their token is refused.
func TestAdminEraseCutsTheUserOff(t *testing.T) {
	t.Parallel()
	e := startErasureEnv(t)
	base := e.s.base
	dave, bob := signUp(t, base, "dave"), signUp(t, base, "bob")
	if a := call(t, http.MethodPatch, base+"/v1/im/users/me", dave.token, "nick", `{"nickname":"`+erasedNick+`"}`); a.status != http.StatusOK {
		t.Fatalf("set nickname: %d %s", a.status, a.raw)
	}
	gid := createGroup(t, base, bob, "room")
	joinGroup(t, base, dave, gid)
	sendMany(t, base, dave, []string{"grp" + gid}, erasedText, 10)
	sendMany(t, base, bob, []string{"grp" + gid}, keptText, 10)
	db := openTenantMySQL(t, e.env)
	waitCount(t, "dave's projected messages", 10, func() int { return countMessages(t, db, erasedText) })
	waitCount(t, "bob's projected messages", 10, func() int { return countMessages(t, db, keptText) })

	out, errOut, err := runCLI(t, "admin", "send", "--config", e.s.file, "--type", "user.erase", "--tenant", "demo",
		"--payload", `{"user_id":"`+dave.id+`","reason":"asked to be forgotten"}`)
	if err != nil || !strings.Contains(out, `"status": "succeeded"`) {
		t.Fatalf("admin user.erase: %v\n%s\n%s", err, out, errOut)
	}
	waitCount(t, "dave's messages showing the erased marker", 10, func() int { return countMessages(t, db, `$erased`) })
	waitCount(t, "rows holding dave's nickname", 0, func() int { return searchMySQL(t, db, erasedNick) })
	if n := countMessages(t, db, erasedText); n != 0 {
		t.Errorf("dave's messages in clear after the erasure: %d", n)
	}
	if n := countMessages(t, db, keptText); n != 10 {
		t.Errorf("bob's messages after the erasure: %d, want 10", n)
	}
	if n := searchPostgres(t, e.env.dbURL, "", erasedText, erasedNick, "asked to be forgotten"); n != 0 {
		t.Errorf("%d PostgreSQL rows hold dave's plaintext or the reason", n)
	}
	if a := call(t, http.MethodGet, base+"/v1/im/users/me", dave.token, "", ""); a.status != http.StatusForbidden || a.Reason != "user_banned" {
		t.Errorf("the erased user's token: %d %s, want 403 user_banned", a.status, a.raw)
	}
}

// waitCount polls count until it returns want, for up to 60 seconds.
func waitCount(t *testing.T, what string, want int, count func() int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := count()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", what, got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func openTenantMySQL(t *testing.T, env *serveEnv) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", env.mysql()+env.template+"_demo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// countMessages counts the message rows of both message tables whose content holds s.
func countMessages(t *testing.T, db *sql.DB, s string) int {
	t.Helper()
	total := 0
	for _, table := range []string{"im_group_messages", "im_messages"} {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE CAST(content AS CHAR) LIKE ?", "%"+s+"%").Scan(&n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// searchMySQL counts the rows of every table of db that hold s in any column.
func searchMySQL(t *testing.T, db *sql.DB, s string) int {
	t.Helper()
	rows, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if len(tables) == 0 {
		t.Fatal("the tenant database has no tables")
	}
	hits := 0
	for _, table := range tables {
		hits += searchRows(t, db, "SELECT * FROM `"+table+"`", s)
	}
	return hits
}

func searchRows(t *testing.T, db *sql.DB, query, s string) int {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	hits := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if strings.Contains(string(v), s) {
				hits++
				break
			}
		}
	}
	return hits
}

// searchPostgres counts the rows of table (every table when "") of the event store database
// that hold one of ss in their text form.
func searchPostgres(t *testing.T, url, table string, ss ...string) int {
	t.Helper()
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables of the event store: %v, %v", tables, err)
	}
	if table != "" {
		tables = []string{table}
	}
	hits := 0
	for _, table := range tables {
		for _, s := range ss {
			var n int
			q := fmt.Sprintf(`SELECT COUNT(*) FROM %s t WHERE t::text LIKE $1`, pgx.Identifier{table}.Sanitize())
			if err := conn.QueryRow(ctx, q, "%"+s+"%").Scan(&n); err != nil {
				t.Fatalf("search %s: %v", table, err)
			}
			if n > 0 {
				t.Logf("PostgreSQL table %s: %d rows hold %q", table, n, s)
			}
			hits += n
		}
	}
	return hits
}

// searchKafka reads every record of every topic of the broker at addr from the start and counts
// those whose key, value or headers hold s.
func searchKafka(t *testing.T, addr, s string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeRegex(), kgo.ConsumeTopics(".*"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hits, records := 0, 0
	start, idle := time.Now(), time.Now()
	// Until the first record the client is still finding the topics; after it, 3 s without a
	// record is the end of every topic.
	for (records == 0 && time.Since(start) < 30*time.Second) || (records > 0 && time.Since(idle) < 3*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			records++
			idle = time.Now()
			text := string(r.Key) + string(r.Value)
			for _, h := range r.Headers {
				text += h.Key + string(h.Value)
			}
			if strings.Contains(text, s) {
				hits++
			}
		})
	}
	if records < 1000 {
		t.Fatalf("read %d Kafka records, fewer than the messages sent: the search would prove nothing", records)
	}
	return hits
}

// searchRedis counts the keys under prefix whose value holds s.
func searchRedis(t *testing.T, prefix, s string) int {
	t.Helper()
	ctx := testenv.Context(t)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr})
	defer rdb.Close()
	hits := 0
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		var text string
		switch rdb.Type(ctx, key).Val() {
		case "string":
			text = rdb.Get(ctx, key).Val()
		case "hash":
			text = fmt.Sprint(rdb.HGetAll(ctx, key).Val())
		case "set":
			text = fmt.Sprint(rdb.SMembers(ctx, key).Val())
		case "zset":
			text = fmt.Sprint(rdb.ZRange(ctx, key, 0, -1).Val())
		case "list":
			text = fmt.Sprint(rdb.LRange(ctx, key, 0, -1).Val())
		case "stream":
			text = fmt.Sprint(rdb.XRange(ctx, key, "-", "+").Val())
		}
		if strings.Contains(key+text, s) {
			if hits < 3 {
				t.Logf("redis key %s holds %q: %.300s", key, s, text)
			}
			hits++
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return hits
}

// readExports returns the JSONL export and the rows of the Parquet export as text.
func readExports(t *testing.T, jsonl, pq string) string {
	t.Helper()
	b, err := os.ReadFile(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.ReadFile[export.Row](pq)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 1000 || strings.Count(string(b), "\n") != len(rows) {
		t.Fatalf("exports: %d JSONL lines, %d Parquet rows", strings.Count(string(b), "\n"), len(rows))
	}
	p, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + string(p)
}
