package models

import (
	"bytes"
	"context"
	"slices"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// insertBatch bounds the rows of one INSERT (a statement's parameters are limited).
const insertBatch = 500

// InsertInBatches inserts rows insertBatch at a time; onConflict, when set, is the ON clause
// (e.g. "CONFLICT (id) DO NOTHING").
func InsertInBatches[T any](ctx context.Context, db bun.IDB, rows []T, onConflict string) error {
	for start := 0; start < len(rows); start += insertBatch {
		batch := rows[start:min(start+insertBatch, len(rows))]
		q := db.NewInsert().Model(&batch)
		if onConflict != "" {
			q = q.On(onConflict)
		}
		if _, err := q.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// RowsByID reads the rows of T whose id (as id reads it) is in ids, by id, IDChunk ids a
// statement (a statement's parameters are limited).
func RowsByID[T any](ctx context.Context, db bun.IDB, ids []uuid.UUID, id func(*T) uuid.UUID) (map[uuid.UUID]T, error) {
	out := make(map[uuid.UUID]T, len(ids))
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	for start := 0; start < len(ids); start += IDChunk {
		var rows []T
		if err := db.NewSelect().Model(&rows).Where("?TableAlias.id IN (?)", bun.In(ids[start:min(start+IDChunk, len(ids))])).Scan(ctx); err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[id(&r)] = r
		}
	}
	return out, nil
}

// IDChunk bounds the ids of one IN list: Postgres takes 65,535 parameters a statement, SQLite
// 32,766.
const IDChunk = 5000
