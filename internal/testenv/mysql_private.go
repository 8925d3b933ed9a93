package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PrivateMySQL is a MariaDB server of one test: its own data directory and port, so a test can
// stop and start it (a MySQL outage) without touching the shared server. Stop and Start may be
// called any number of times; the server is stopped and its files removed at cleanup.
type PrivateMySQL struct {
	t       testing.TB
	dir     string
	port    int
	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped chan struct{}
}

// StartPrivateMySQL initialises a data directory with mariadb-install-db and starts mariadbd on
// a free loopback port. It fails the test, naming what to install, when the binaries are missing.
func StartPrivateMySQL(t testing.TB) *PrivateMySQL {
	t.Helper()
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found (%v): install MariaDB server (apt-get install mariadb-server) for tests that stop their own MySQL", bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "immdb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--user="+currentUser())
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m := &PrivateMySQL{t: t, dir: dir, port: freePort(t)}
	m.Start()
	t.Cleanup(m.Stop)
	return m
}

// DSN is the server DSN (no database) of the instance, with parseTime and multiStatements.
func (m *PrivateMySQL) DSN() string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/?parseTime=true&multiStatements=true", m.port)
}

// Start runs mariadbd and waits until it answers (30 s at most).
func (m *PrivateMySQL) Start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return
	}
	cmd := exec.Command("mariadbd", "--no-defaults", "--datadir="+filepath.Join(m.dir, "data"),
		fmt.Sprintf("--port=%d", m.port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(m.dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(m.dir, "mysqld.pid"), "--user="+currentUser(), "--skip-log-bin",
		"--innodb-buffer-pool-size=16M", "--log-error="+filepath.Join(m.dir, "error.log"))
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start mariadbd: %v", err)
	}
	m.cmd, m.stopped = cmd, make(chan struct{})
	stopped := m.stopped
	go func() { _ = cmd.Wait(); close(stopped) }()
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		m.t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-stopped:
			log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
			m.t.Fatalf("mariadbd exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("private mariadbd not answering after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop shuts mariadbd down (SIGTERM, then SIGKILL after 20 s) and waits for it.
func (m *PrivateMySQL) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.stopped:
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.stopped
	}
	m.cmd = nil
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}
