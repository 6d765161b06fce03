package db

import (
	"context"
	"io/fs"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// UpgradeAsRelease runs Upgrade as a release whose newest migration is
// upTo (this one's migrations up to it) and whose functions/ is the one
// file functions: an older release, to a test.
func UpgradeAsRelease(ctx context.Context, dsn string, upTo int64, functions string, opts Options) (Result, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return Result{}, err
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	schema := fstest.MapFS{}
	entries, err := fs.ReadDir(schemaFS, "schema")
	if err != nil {
		return Result{}, err
	}
	for _, e := range entries {
		digits, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(digits, 10, 64); err != nil || v > upTo {
			continue
		}
		text, err := fs.ReadFile(schemaFS, "schema/"+e.Name())
		if err != nil {
			return Result{}, err
		}
		schema["schema/"+e.Name()] = &fstest.MapFile{Data: text}
	}
	rel := release{schema: schema, functions: fstest.MapFS{"functions/old.sql": {Data: []byte(functions)}}, files: []string{"old.sql"}}
	return upgrade(ctx, sqlDB, rel, opts)
}

// UpgradeLockTimeout is how long the upgrade waits for one lock.
const UpgradeLockTimeout = upgradeLockTimeout

// UpgradeWithMigration runs Upgrade (migrations at start) as this release
// with one more migration, name (e.g. "99990_x.sql") holding up.
func UpgradeWithMigration(ctx context.Context, dsn, name, up string) (Result, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return Result{}, err
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	schema := fstest.MapFS{"schema/" + name: {Data: []byte("-- +goose Up\n" + up + "\n-- +goose Down\n")}}
	entries, err := fs.ReadDir(schemaFS, "schema")
	if err != nil {
		return Result{}, err
	}
	for _, e := range entries {
		text, err := fs.ReadFile(schemaFS, "schema/"+e.Name())
		if err != nil {
			return Result{}, err
		}
		schema["schema/"+e.Name()] = &fstest.MapFile{Data: text}
	}
	return upgrade(ctx, sqlDB, release{schema: schema, functions: functionsFS, files: FunctionFiles}, Options{Migrate: true})
}
