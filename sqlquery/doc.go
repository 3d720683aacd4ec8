// Package sqlquery runs read-only SQL over the rollout stores with an
// embedded DuckDB (github.com/duckdb/duckdb-go), and computes the overview
// charts through the same engine.
//
// # Tables
//
// The store a request names is the table records; every other store is a
// table of its own name, so experiments can be joined. A name with a dot or
// a dash must be double-quoted: SELECT ... FROM records r JOIN "exp-2.b" o
// ON .... Each table has the columns of rollout.ScanColumns (the rollout
// schema but binary_payload, which is read by id through the blob API) and
// reads the tier the request's source selects: fragments (the merged base
// table), wal (pending generations only) or all (both, newest write per
// id), exactly as the records listing does.
//
// # Scan and pushdown
//
// A table name resolves (DuckDB replacement scan) to the table function
// lance_context_scan(store), which streams our own Lance scan
// (rollout.Store.Scan) into DuckDB vectors. DuckDB pushes the projection
// down: the scan reads only the columns a query names, so an aggregate over
// reward never reads content or the token lists. EXPLAIN shows it
// ("Projections: reward"), and every result lists the columns each scan
// read (Result.Scans).
//
// DuckDB's C API gives table functions no filter pushdown, so the engine
// derives scan filters itself from DuckDB's parse tree (json_serialize_sql)
// for the simplest shape only: one SELECT of one store, no join, set
// operation, CTE or sample, and top-level AND conjuncts of the form column
// op literal (numbers: <, <=, >, >=, widened by a relative 1e-6 so a FLOAT
// compared in float32 is never dropped; strings: = only) or column IS NULL.
// The scan drops the rows they reject before copying batches into DuckDB,
// which still applies the whole WHERE: the filters can only save work, never
// change a result. Result.Scans lists them and the rows they kept.
//
// A fragments scan with filters materializes late: it reads the filtered
// columns of every row first and the other projected columns only for the
// rows the filters keep (a late rollout.BaseScan), so a selective WHERE never
// decodes the strings of the rows it drops. Under ORDER BY column [DESC]
// LIMIT n (a select list of bare columns, every WHERE conjunct a filter)
// it takes the other columns only for rows that can still be among the
// first n: those sorting at or before the n-th best value among rows that
// certainly pass the WHERE (see topN). An all scan of a store with no
// pending generation is the base table alone and reads the same way. It
// reads the base table the store's own scan would (the latest version, or
// the one a checkout pins);
// a base table lacking a column, or holding one in another type (an older
// or reference table), is read by the store's scan, which converts.
//
// # Sandbox
//
// Each query runs in a fresh in-memory DuckDB database opened with
// enable_external_access=false (no file, no network: read_csv, COPY TO,
// ATTACH of a file, EXPORT are refused by DuckDB), extension autoinstall and
// autoload off, and lock_configuration=true (no SET, RESET). Before DuckDB
// sees a statement, anything that does not start as a read (SELECT, WITH,
// FROM, VALUES, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE) is refused, and the
// prepared statement must be one SELECT (or EXPLAIN of one): PRAGMA, SET,
// INSTALL, LOAD, ATTACH, COPY, CREATE, INSERT, UPDATE, DELETE, CALL and
// several statements at once are errors wrapping ErrInvalid. Prepare runs
// nothing; only the single checked statement executes.
//
// # Limits
//
// Each is configurable (Limits) and named in the LimitError it raises,
// with the setting that raises it (Limits.Settings; the master's LC_SQL_*
// variables by default):
//
//	max_rows_scanned   100,000,000 rows the scans of one query hand to DuckDB
//	max_rows_returned  10,000 result rows (Request.MaxRows truncates instead)
//	max_query_time     30 s, planning included; the query is interrupted
//	max_memory         512 MB, DuckDB's memory_limit; no spilling to disk
//
// Rows scanned are the rows a scan delivers after its index lookup and scan
// filters, not the rows of the store: WHERE rollout_id = 'r5' on a store of
// millions of rows reads the rollout's rows through the base table's BTree
// index (indexscan.go) and counts those. Rows a statement generates itself
// (range, generate_series) count too: a plan whose generated source DuckDB
// expects to exceed the bound is refused before it runs (generated.go).
// The result bound is a browser console's; the master gives the charts
// their own scan bound (LC_CHARTS_MAX_ROWS_SCANNED).
//
// # Charts
//
// Engine.Charts computes the overview charts with SQL over four columns of
// every row (reward, policy_version, created_at, num_output_tokens) and the
// content length of rows without a token count. With CacheChartBases (the
// master: LC_CHARTS_CACHE_MB, default 256), the base table's part of those
// inputs is kept per store in a sandboxed DuckDB database of its own (a
// chart base: tables cb and cc, see chartbase.go), valid for one base table
// version and commit time. Charts of fragments then read no storage, and
// charts of all scan the WAL tier alone (at the same base version: every use
// reads the base's identity before and after its scans, and scans the store
// when it changed) and drop the base rows whose id a pending row writes, as
// a scan of all does. A merge, compaction, delete or checkout makes a new
// base table. The first charts after it update the store's chart base when
// they can do so exactly and for less than a rebuild: every row of a chart
// base carries its row address, so the rows of fragments gone and the rows
// newly deleted are deleted from it and the new fragments alone are read
// (Charts.Base "updated"); otherwise (more than half the rows changed, a
// chart column's id or type changed, a fragment id names other files,
// deleted rows live again after a checkout, or a table whose columns the
// store's scan converts) they build a new one. Chart bases above the cap (an estimate of their storage, all stores together) are not
// kept; the least recently used go first.
//
// DuckDB is C++ (cgo). A binary built with CGO_ENABLED=0 compiles, and
// every query and chart fails with ErrUnavailable (HTTP 501).
package sqlquery
