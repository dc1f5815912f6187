package database

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/redact"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Flag registers --database-url and --database-url-file (cli.SecretFlag): the URL, or a file
// whose first line is the URL; from the environment BATCHCLAIM_DATABASE_URL,
// BATCHCLAIM_DATABASE_URL_FILE, then DATABASE_URL. A password in the URL on the command line
// is warned about.
func Flag(fs *flag.FlagSet) *string {
	return cli.SecretFlag(fs, "database-url", "Postgres URL, e.g. postgres://user@host:5432/db (default $BATCHCLAIM_DATABASE_URL, then $DATABASE_URL); "+
		"a password in it is visible in ps: give it in the environment, with --database-url-file, in PGPASSWORD or a pgpass file", redact.HasSecret)
}

// SchemaFlag registers --schema: the Postgres schema of batchclaim's tables.
func SchemaFlag(fs *flag.FlagSet) *string {
	return fs.String("schema", pgdb.SchemaDefault, "Postgres schema of batchclaim's tables, as migrate created it (docs/schema.md)")
}

// Open connects and pings, so that a bad URL or an unreachable database fails here with
// one clear line instead of on first use. Each option adjusts the pool's config first.
func Open(ctx context.Context, dbURL string, maxConns int32, options ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	return OpenNoted(ctx, dbURL, maxConns, nil, options...)
}

// OpenNoted is Open that, when the server refuses a startup parameter the options set
// (a connection pooler such as PgBouncer does: it passes on only the few it tracks), connects
// again without them and, unless the URL chose default_query_exec_mode, with statements that
// prepare nothing by name (a pooler in transaction mode hands each transaction any server
// connection). note (nil: none) is told what changed and why.
func OpenNoted(ctx context.Context, dbURL string, maxConns int32, note func(string), options ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	if dbURL == "" {
		return nil, errors.New("no database: set --database-url or DATABASE_URL")
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("bad database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	for _, o := range options {
		o(cfg)
	}
	pool, err := connectPool(ctx, cfg)
	if err != nil && refusedStartupParameter(err) {
		if dropped := behindPooler(cfg, strings.Contains(dbURL, "default_query_exec_mode")); dropped != "" {
			if note != nil {
				note(dropped)
			}
			pool, err = connectPool(ctx, cfg)
		}
	}
	return pool, err
}

func connectPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bad database URL: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach database at %s: %w", where(cfg), err)
	}
	return pool, nil
}

// poolerParams are the startup parameters PgBouncer passes on to the server; it refuses a
// client that sends any other.
var poolerParams = map[string]bool{"application_name": true, "client_encoding": true, "datestyle": true,
	"timezone": true, "standard_conforming_strings": true}

// refusedStartupParameter reports the error of a pooler refusing a startup parameter.
func refusedStartupParameter(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.Contains(pgErr.Message, "unsupported startup parameter")
}

// behindPooler removes the startup parameters a pooler refuses and, unless the URL chose an
// exec mode, makes statements prepare nothing by name. It says what it changed (empty:
// nothing it could change).
func behindPooler(cfg *pgxpool.Config, modeChosen bool) string {
	var dropped []string
	for k := range cfg.ConnConfig.RuntimeParams {
		if !poolerParams[strings.ToLower(k)] {
			dropped = append(dropped, k)
			delete(cfg.ConnConfig.RuntimeParams, k)
		}
	}
	if len(dropped) == 0 {
		return ""
	}
	slices.Sort(dropped)
	msg := fmt.Sprintf("the database refused the startup parameters %s (a connection pooler?): connecting without them; "+
		"transactions that write claims set them for themselves, and docs/operations.md (Behind PgBouncer) says how to set them for the role", strings.Join(dropped, ", "))
	if !modeChosen {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		msg += "; statements prepare nothing by name (default_query_exec_mode=exec; set it in the URL to choose another)"
	}
	return msg
}

// CheckURL validates a URL without connecting (migrations open their own connection).
func CheckURL(ctx context.Context, dbURL string) error {
	pool, err := Open(ctx, dbURL, 1)
	if err != nil {
		return err
	}
	pool.Close()
	return nil
}

func where(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}
