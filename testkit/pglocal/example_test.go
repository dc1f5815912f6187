package pglocal_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// A throwaway cluster for a test: started from the local binaries with durability switched
// off, a setting overridden through Options.Settings, reached through URL, and gone after
// Stop. It needs the PostgreSQL server binaries (initdb, pg_ctl, postgres).
func ExampleStart() {
	ctx := context.Background()
	c, err := pglocal.Start(ctx, pglocal.Options{
		Settings: map[string]string{"synchronous_commit": "on"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx) // a second Stop does nothing

	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"fsync", "synchronous_commit", "max_connections"} {
		var value string
		if err := conn.QueryRow(ctx, "SHOW "+name).Scan(&value); err != nil {
			log.Fatal(err)
		}
		fmt.Println(name, value)
	}
	var user string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil {
		log.Fatal(err)
	}
	fmt.Println("user", user)
	_ = conn.Close(ctx)

	fmt.Println("stop:", c.Stop(ctx))
	_, err = pgx.Connect(ctx, c.URL())
	fmt.Println("connect after stop fails:", err != nil)
	// Output:
	// fsync off
	// synchronous_commit on
	// max_connections 200
	// user postgres
	// stop: <nil>
	// connect after stop fails: true
}

// Find checks a given directory for the three binaries a cluster needs and names the missing
// ones; the error matches ErrNotFound. Find("") searches PATH and the usual install
// directories instead.
func ExampleFind() {
	dir, err := os.MkdirTemp("", "no-postgres-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	_, err = pglocal.Find(dir)
	fmt.Println(errors.Is(err, pglocal.ErrNotFound))
	fmt.Println(strings.ReplaceAll(err.Error(), dir, "DIR"))
	// Output:
	// true
	// PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: initdb, pg_ctl, postgres missing in DIR
}

// FreePort hands out a port nothing listens on, never the same one twice in a process, so
// two servers started side by side do not pick the same port.
func ExampleFreePort() {
	a, err := pglocal.FreePort()
	if err != nil {
		log.Fatal(err)
	}
	b, err := pglocal.FreePort()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("distinct:", a != b)

	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(a)))
	fmt.Println("bindable:", err == nil)
	if err == nil {
		_ = l.Close()
	}
	// Output:
	// distinct: true
	// bindable: true
}
