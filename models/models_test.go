package models_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

func TestMigrationsHaveTheSameNamesOnBothDialects(t *testing.T) {
	names := func(d models.Dialect) []string {
		entries, err := fs.ReadDir(models.MigrationFiles(), "migrations/"+string(d))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	pg, lite := names(models.Postgres), names(models.SQLite)
	if strings.Join(pg, ",") != strings.Join(lite, ",") {
		t.Fatalf("postgres migrations %v differ from sqlite migrations %v", pg, lite)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		applied, err := s.Migrate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) != 0 {
			t.Fatalf("second migrate applied %v, want nothing", applied)
		}
	})
}

func TestOpenRejectsUnknownURLs(t *testing.T) {
	for _, url := range []string{"mysql://u:secret@h/db", "", "sqlite:"} {
		_, err := models.Open(ctx, url)
		if err == nil {
			t.Errorf("Open(%q) succeeded, want an error", url)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error leaks the password: %v", url, err)
		}
	}
}
