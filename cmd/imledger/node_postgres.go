package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/internal/pgerr"
	"github.com/imledger/imledger/migrations"
)

// ensureDatabase creates the database named in url when it does not exist, connecting to the
// "postgres" maintenance database of the same server for that. It reports whether it created it.
func ensureDatabase(ctx context.Context, url string) (bool, error) {
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return false, errors.New("postgres.url: not a valid PostgreSQL connection URL")
	}
	name := cc.Database
	if name == "" || name == "postgres" {
		return false, nil
	}
	mc := cc.Copy()
	mc.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, mc)
	if err != nil {
		return false, fmt.Errorf("connect to the postgres maintenance database: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return false, nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	// Created concurrently: duplicate_database, or a unique violation of pg_database's name index
	// when both CREATE DATABASE statements passed the existence check.
	if pgerr.Code(err) == pgerr.DuplicateDatabase || pgerr.Code(err) == pgerr.UniqueViolation {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create database %s: %w", name, err)
	}
	return true, nil
}

// migratePostgres creates the database if needed and applies the event store migrations.
func migratePostgres(ctx context.Context, cfg config.PostgresConfig, log *slog.Logger) error {
	created, err := ensureDatabase(ctx, cfg.URL)
	if err != nil {
		return err
	}
	if created {
		log.InfoContext(ctx, "created the event store database")
	}
	cc, err := pgx.ParseConfig(cfg.URL)
	if err != nil {
		return errors.New("postgres.url: not a valid PostgreSQL connection URL")
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	if err := migrations.UpPostgres(ctx, db); err != nil {
		return err
	}
	log.InfoContext(ctx, "event store migrations applied", "database", cc.Database)
	return nil
}

// checkEventStore creates and changes nothing: it connects to the database postgres.url names and
// checks that it holds this build's event store schema. A database that does not exist, holds no
// event store or an older one is an error naming it (and the server) and saying how to fix it.
func checkEventStore(ctx context.Context, cfg config.PostgresConfig) error {
	cc, err := pgx.ParseConfig(cfg.URL)
	if err != nil {
		return errors.New("postgres.url: not a valid PostgreSQL connection URL")
	}
	where := fmt.Sprintf("database %q on %s:%d", cc.Database, cc.Host, cc.Port)
	conn, err := pgx.ConnectConfig(ctx, cc)
	if pgerr.Code(err) == pgerr.UnknownDatabase {
		return fmt.Errorf("postgres.url: %s does not exist: check the URL, or create it with imledger migrate", where)
	}
	if err != nil {
		return fmt.Errorf("connect to %s: %w", where, err)
	}
	defer conn.Close(ctx)
	var (
		applied  int64
		versions bool
	)
	err = conn.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&versions)
	if err == nil && versions {
		err = conn.QueryRow(ctx, `SELECT COALESCE(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&applied)
	}
	if err != nil {
		return fmt.Errorf("read the event store schema version of %s: %w", where, err)
	}
	latest, err := migrations.LatestPostgres()
	if err != nil {
		return err
	}
	switch {
	case applied == 0:
		return fmt.Errorf("postgres.url: %s holds no event store: check the URL, or create it with imledger migrate", where)
	case applied < latest:
		return fmt.Errorf("postgres.url: %s holds event store schema version %d, this build needs %d: run imledger migrate", where, applied, latest)
	}
	return nil
}

// bulkReadBuffer is the socket read buffer of the connections of the tools that stream the whole
// log (export, republish): pgx reads 8 KiB at a time by default, one system call each, which was
// a third of an export's CPU time.
const bulkReadBuffer = 256 << 10

// openPool connects the event store pool and checks that the server answers. With bulk, its
// connections read from the socket through a bulkReadBuffer.
func openPool(ctx context.Context, cfg config.PostgresConfig, bulk bool) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, errors.New("postgres.url: not a valid PostgreSQL connection URL")
	}
	pc.MaxConns = cfg.MaxConns
	if bulk {
		pc.ConnConfig.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
			return pgproto3.NewFrontend(bufio.NewReaderSize(r, bulkReadBuffer), w)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres ping: %w", err)
	}
	return pool, nil
}
