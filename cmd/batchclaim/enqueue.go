package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/pgdb"
)

func runEnqueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("enqueue", "--service-id S [FILE|-]",
		"Stores the batches of a serialized BatchList (from FILE, or standard input with - or no\nargument) for service_id S, after that service_id's earlier batches. Storing a batch again\nchanges nothing. Prints one line per batch: its id, its seq, and whether it was new.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	serviceID := fs.String("service-id", "", "the service_id the batches belong to (required)")
	files, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *serviceID == "" {
		return errorf("--service-id is required")
	}
	if err := batchclaim.ValidateServiceID(*serviceID); err != nil {
		return fmt.Errorf("--service-id: %w", err)
	}
	if len(files) > 1 {
		return errorf("at most one FILE, got %d arguments", len(files))
	}
	in := io.Reader(os.Stdin)
	if len(files) == 1 && files[0] != "-" {
		name := files[0]
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	body, err := io.ReadAll(io.LimitReader(in, ingest.MaxBodyDefault+1))
	if err != nil {
		return err
	}
	if len(body) > ingest.MaxBodyDefault {
		return fmt.Errorf("input is larger than %d bytes", ingest.MaxBodyDefault)
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	stored, err := ingest.EnqueueBatchList(ctx, pgdb.QuerierInSchema(tx, *schema), *serviceID, body)
	if err != nil {
		return database.Explain(*schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return database.Explain(*schema, err)
	}
	for _, s := range stored {
		state := "stored"
		if !s.New {
			state = "already stored"
		}
		fmt.Fprintf(stdout, "%s seq=%d %s\n", s.BatchID, s.Seq, state)
	}
	return nil
}
