package pgdb

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// PermissionDenied reports SQLSTATE 42501 (insufficient_privilege): the role may not do what
// the statement asked. Trying again does not help; a grant does.
func PermissionDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// writes is what the operators' writes (resume, retry, cancel) and the data path need of each
// of batchclaim's tables beyond SELECT.
var writes = map[string]string{
	"service_halts":     "DELETE",
	"batches":           "UPDATE",
	"batch_transitions": "INSERT",
	"service_id_claims": "INSERT",
}

// MissingGrant names the grant that the refusal err (PermissionDenied) asks for, on the object
// the database named, in schema: "DELETE ON batchclaim.service_halts", "USAGE ON SEQUENCE
// batchclaim.batches_pos_seq", "USAGE ON SCHEMA batchclaim". It returns "" for any other error.
func MissingGrant(err error, schema string) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		return ""
	}
	what, ok := strings.CutPrefix(pgErr.Message, "permission denied for ")
	kind, name, ok2 := strings.Cut(what, " ")
	if !ok || !ok2 {
		return "the privileges the statement needs (" + pgErr.Message + ")"
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	switch kind {
	case "schema":
		return "USAGE ON SCHEMA " + name
	case "sequence":
		return fmt.Sprintf("USAGE ON SEQUENCE %s.%s", schema, name)
	case "function":
		return fmt.Sprintf("EXECUTE ON FUNCTION %s.%s", schema, name)
	case "table":
		if w, ok := writes[name]; ok {
			return fmt.Sprintf("%s ON %s.%s", w, schema, name)
		}
		return fmt.Sprintf("SELECT, INSERT, UPDATE, DELETE ON %s.%s", schema, name)
	}
	return "the privileges the statement needs (" + pgErr.Message + ")"
}
