package pgdb

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ConfigureTypes has every connection of the pool pc configures send and read the library's
// identifiers (uuid.UUID: instance ids, claimants, nonces) as the 16 bytes they are. Without
// it pgx knows uuid.UUID only as a driver.Valuer and sql.Scanner: each parameter is turned into
// text, refused by the binary encoder, parsed back and encoded again (about six allocations
// and a formatted error per parameter, two parameters in most of a node's statements), and
// each column read is parsed from text. The wire format and the values are the same either
// way. claims.ConfigurePool calls it; call it on a pool of your own that the library's nodes
// share (SharePool), before pgxpool.NewWithConfig. It chains to an AfterConnect already set.
func ConfigureTypes(pc *pgxpool.Config) {
	next := pc.AfterConnect
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		RegisterTypes(c.TypeMap())
		if next != nil {
			return next(ctx, c)
		}
		return nil
	}
}

// RegisterTypes registers with m what ConfigureTypes registers on each connection: the uuid
// type, and its array, with a codec that reads and writes uuid.UUID directly (any other Go
// type as pgx's own uuid codec does).
func RegisterTypes(m *pgtype.Map) {
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}

// uuidCodec is pgx's uuid codec with plans of its own for uuid.UUID values and *uuid.UUID
// targets.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return encodeUUIDBinary{}
		case pgtype.TextFormatCode:
			return encodeUUIDText{}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return scanUUIDBinary{}
		case pgtype.TextFormatCode:
			return scanUUIDText{}
		}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeUUIDBinary struct{}

func (encodeUUIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(uuid.UUID)
	return append(buf, u[:]...), nil
}

type encodeUUIDText struct{}

func (encodeUUIDText) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(uuid.UUID).String()...), nil
}

// A NULL reads as uuid.Nil, as uuid.UUID's own Scan leaves a zero value zero.
type scanUUIDBinary struct{}

func (scanUUIDBinary) Scan(src []byte, dst any) error {
	d := dst.(*uuid.UUID)
	switch len(src) {
	case 16:
		copy(d[:], src)
		return nil
	case 0:
		if src == nil {
			*d = uuid.Nil
			return nil
		}
	}
	return fmt.Errorf("invalid length for a uuid: %d bytes", len(src))
}

type scanUUIDText struct{}

func (scanUUIDText) Scan(src []byte, dst any) error {
	d := dst.(*uuid.UUID)
	if src == nil {
		*d = uuid.Nil
		return nil
	}
	u, err := uuid.ParseBytes(src)
	if err != nil {
		return err
	}
	*d = u
	return nil
}
