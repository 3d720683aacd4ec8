//go:build cgo

package sqlquery

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/rollout"
)

// scanFunc is the table function every store name resolves to.
const scanFunc = "lance_context_scan"

// baseFunc is the table function a chart base reads base table fragments
// with (see directScan).
const baseFunc = "lance_context_base"

// RecordsTable is the name of the queried store in SQL.
const RecordsTable = "records"

// query is the state of one running query, shared by its scans.
type query struct {
	ctx     context.Context
	open    Opener
	source  rollout.Source
	store   string
	limits  Limits
	scanned atomic.Int64
	wg      sync.WaitGroup

	hintStore string // the store the hints filter (set before the statement is bound)
	hints     []hint
	top       *topN       // the hinted store's ORDER BY ... LIMIT bound, or nil
	direct    *directScan // what baseFunc reads (a chart base's scans only)

	mu    sync.Mutex
	err   error          // first error of a scan or bind: the cause behind DuckDB's message
	scans []*scanSource  // scans started
	binds map[string]int // scans bound, by store
}

// resolve maps a table name of the query to a store name.
func (q *query) resolve(name string) string {
	if strings.EqualFold(name, RecordsTable) {
		return q.store
	}
	return name
}

func (q *query) fail(err error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
	}
	return err
}

func (q *query) firstErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// Query runs one read-only statement in a fresh, sandboxed DuckDB database
// that sees nothing but the stores.
func (e *Engine) Query(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	src, err := rollout.ParseSource(string(req.Source))
	if err != nil {
		return nil, invalidf("%v", err)
	}
	if strings.TrimSpace(req.SQL) == "" {
		return nil, invalidf("sql is empty; send one SELECT statement")
	}
	lim := req.Limits.withDefaults(e.limits)
	res := &Result{}
	q, err := e.session(ctx, req.Store, src, lim, func(qctx context.Context, c *duckdb.Conn, q *query) error {
		if req.Version != 0 {
			q.open = atVersion(q.open, req.Store, req.Version)
		}
		return run(qctx, c, q, req, lim, res)
	})
	if err != nil {
		return nil, err
	}
	res.RowsScanned = q.scanned.Load()
	res.Scans = q.scanStats()
	res.Elapsed = time.Since(start)
	return res, nil
}

func (q *query) scanStats() []ScanStat {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := []ScanStat{}
	for _, s := range q.scans {
		st := ScanStat{QueryScan: api.QueryScan{Store: s.store, Source: string(s.source), Columns: s.projected, Rows: s.rows.Load(), RowsKept: s.kept.Load(), Filters: []string{}}, late: s.late}
		for _, h := range s.hints {
			st.Filters = append(st.Filters, h.String())
		}
		out = append(out, st)
	}
	return out
}

// session runs fn on a fresh sandboxed database, within the time limit,
// and classifies its failure.
func (e *Engine) session(ctx context.Context, store string, src rollout.Source, lim Limits, fn func(context.Context, *duckdb.Conn, *query) error) (*query, error) {
	qctx, cancel := context.WithTimeout(ctx, lim.MaxTime)
	q := &query{ctx: qctx, open: e.open, source: src, store: store, limits: lim}
	defer func() {
		cancel()
		q.wg.Wait() // scan producers end with the query
	}()
	db, conn, err := sandbox(qctx, q.limits, func() *query { return q })
	if err != nil {
		return nil, err
	}
	defer db.Close()
	defer conn.Close()
	if err := raw(conn, func(c *duckdb.Conn) error { return fn(qctx, c, q) }); err != nil {
		return nil, q.classify(ctx, qctx, err)
	}
	return q, nil
}

// raw runs fn on the DuckDB connection under conn.
func raw(conn *sql.Conn, fn func(*duckdb.Conn) error) error {
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("sqlquery: driver connection is %T", dc)
		}
		return fn(c)
	})
}

// sandbox opens an in-memory database that can read no file, network or
// extension, whose settings cannot change, with the store scan registered.
// The scan serves the query cur returns when a statement binds it: a
// database kept across requests (a cached chart base) serves each request
// in turn.
func sandbox(ctx context.Context, lim Limits, cur func() *query) (*sql.DB, *sql.Conn, error) {
	dsn := fmt.Sprintf("?enable_external_access=false&autoinstall_known_extensions=false&autoload_known_extensions=false"+
		"&allow_community_extensions=false&allow_unsigned_extensions=false&memory_limit=%dMB&threads=%d&max_temp_directory_size=0B",
		lim.MaxMemoryMB, lim.Threads)
	connector, err := duckdb.NewConnector(dsn, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlquery: open engine: %w", err)
	}
	duckdb.RegisterReplacementScan(connector, func(name string) (string, []any, error) {
		q := cur()
		if strings.EqualFold(name, RecordsTable) {
			name = q.store
		} else if rollout.ValidateName(name) != nil {
			return "", nil, q.fail(invalidf("no table %q: query records, or another store by its name (in double quotes when it has a dot or dash)", name))
		}
		return scanFunc, []any{name}, nil
	})
	db := sql.OpenDB(connector)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("sqlquery: connect engine: %w", err)
	}
	fail := func(err error) (*sql.DB, *sql.Conn, error) {
		conn.Close()
		db.Close()
		return nil, nil, err
	}
	if err := registerScan(conn, cur); err != nil {
		return fail(fmt.Errorf("sqlquery: register scan: %w", err))
	}
	if _, err := conn.ExecContext(ctx, "SET lock_configuration = true"); err != nil {
		return fail(fmt.Errorf("sqlquery: lock configuration: %w", err))
	}
	return db, conn, nil
}

// run checks the statement and reads its result into res.
func run(ctx context.Context, c *duckdb.Conn, q *query, req Request, lim Limits, res *Result) error {
	if table, hs, top := queryHints(ctx, c, req.SQL); len(hs) > 0 || top != nil {
		q.hintStore, q.hints, q.top = q.resolve(table), hs, top
	}
	stmt, err := prepareSelect(c, req.SQL)
	if err != nil {
		return err
	}
	defer stmt.Close()
	if err := checkGenerated(ctx, c, q, req.SQL); err != nil {
		return err
	}
	rows, err := stmt.QueryContext(ctx, nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	names := rows.Columns()
	res.Columns = make([]Column, len(names))
	for i, n := range names {
		res.Columns[i] = Column{Name: n}
		if ct, ok := rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
			res.Columns[i].Type = ct.ColumnTypeDatabaseTypeName(i)
		}
	}
	max := lim.MaxRowsReturned
	if req.MaxRows > 0 && req.MaxRows < max {
		max = req.MaxRows
	}
	res.Rows = [][]any{}
	for {
		row := make([]driver.Value, len(names))
		if err := rows.Next(row); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(res.Rows) == max {
			if req.MaxRows > 0 {
				res.Truncated = true
				return nil
			}
			return lim.exceeded("max_rows_returned", fmt.Sprint(lim.MaxRowsReturned),
				"add a LIMIT or an aggregate, or pass max_rows to get the first rows")
		}
		out := make([]any, len(row))
		for i, v := range row {
			out[i] = v
		}
		res.Rows = append(res.Rows, out)
	}
}

// readKeywords may start a statement. Anything else (PRAGMA, SET, COPY,
// ATTACH, INSTALL, CREATE, ...) is refused before DuckDB sees it; the
// statement type DuckDB reports is checked as well.
var readKeywords = map[string]bool{"select": true, "with": true, "from": true, "values": true, "explain": true,
	"describe": true, "show": true, "summarize": true, "": true}

// statementKeywords start DuckDB's statements that are not reads: refused
// as writes or settings. Any other first word is not a statement.
var statementKeywords = map[string]bool{"insert": true, "update": true, "delete": true, "create": true, "drop": true,
	"alter": true, "copy": true, "attach": true, "detach": true, "pragma": true, "set": true, "reset": true, "install": true,
	"load": true, "call": true, "export": true, "import": true, "begin": true, "commit": true, "rollback": true, "abort": true,
	"start": true, "end": true, "checkpoint": true, "force": true, "vacuum": true, "analyze": true, "prepare": true,
	"execute": true, "deallocate": true, "use": true, "truncate": true, "merge": true, "upsert": true, "replace": true,
	"comment": true, "update_extensions": true}

// notAStatement words a statement whose first word is no SQL keyword,
// suggesting the read keyword it is closest to.
func notAStatement(kw string) string {
	best, bestD := "", 3
	for k := range readKeywords {
		if d := editDistance(strings.ToLower(kw), k); k != "" && (d < bestD || d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("syntax error at %q: did you mean %s? Send one SELECT statement (or WITH, FROM, VALUES, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE)", kw, strings.ToUpper(best))
	}
	return fmt.Sprintf("syntax error at %q, which is not a SQL statement: send one SELECT statement (or WITH, FROM, VALUES, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE)", kw)
}

// editDistance is the Levenshtein distance of two short ASCII words.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// prepareSelect prepares text if it is one SELECT, or an EXPLAIN of one,
// and refuses anything else. It prepares without executing: the driver's
// context-aware prepare would run all but the last of several statements.
func prepareSelect(c *duckdb.Conn, text string) (*duckdb.Stmt, error) {
	kw, _ := word(skipSpace(text))
	if !readKeywords[strings.ToLower(kw)] {
		if !statementKeywords[strings.ToLower(kw)] {
			// Not a statement at all (SELEC): a typo, not a write.
			return nil, invalidf("%s", notAStatement(kw))
		}
		return nil, invalidf("only SELECT statements are allowed (got %s); the engine is read-only", strings.ToUpper(kw))
	}
	ds, err := c.Prepare(text)
	if err != nil {
		// The driver refuses several statements without a context; any
		// other error (a column named like "context" too) is DuckDB's own.
		if strings.Contains(err.Error(), "missing context for multi-statement query") {
			return nil, invalidf("send exactly one statement")
		}
		return nil, err
	}
	stmt := ds.(*duckdb.Stmt)
	t, err := stmt.StatementType()
	if err != nil {
		stmt.Close()
		return nil, err
	}
	switch t {
	case duckdb.STATEMENT_TYPE_SELECT:
		return stmt, nil
	case duckdb.STATEMENT_TYPE_EXPLAIN:
		// EXPLAIN ANALYZE runs its statement: allow only the EXPLAIN of a
		// SELECT.
		inner, ok := stripExplain(text)
		if ok {
			var is *duckdb.Stmt
			if is, err = prepareSelect(c, inner); err == nil {
				is.Close()
				return stmt, nil
			}
		}
		stmt.Close()
		if err == nil {
			err = invalidf("EXPLAIN is allowed only as EXPLAIN [ANALYZE] SELECT ...")
		}
		return nil, err
	}
	stmt.Close()
	return nil, invalidf("only SELECT statements are allowed (got a %s statement); the engine is read-only", stmtName(t))
}

// stripExplain returns text without its leading EXPLAIN [ANALYZE] keyword
// and leading comments and whitespace.
func stripExplain(text string) (string, bool) {
	s := skipSpace(text)
	kw, rest := word(s)
	if !strings.EqualFold(kw, "explain") {
		return "", false
	}
	s = skipSpace(rest)
	if kw, rest := word(s); strings.EqualFold(kw, "analyze") || strings.EqualFold(kw, "analyse") {
		s = rest
	}
	return s, true
}

func skipSpace(s string) string {
	for {
		t := strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(t, "--"):
			if i := strings.IndexByte(t, '\n'); i >= 0 {
				s = t[i+1:]
				continue
			}
			return ""
		case strings.HasPrefix(t, "/*"):
			if i := strings.Index(t, "*/"); i >= 0 {
				s = t[i+2:]
				continue
			}
			return ""
		}
		return t
	}
}

func word(s string) (string, string) {
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	return s[:i], s[i:]
}

func stmtName(t duckdb.StmtType) string {
	names := map[duckdb.StmtType]string{
		duckdb.STATEMENT_TYPE_INSERT: "INSERT", duckdb.STATEMENT_TYPE_UPDATE: "UPDATE", duckdb.STATEMENT_TYPE_DELETE: "DELETE",
		duckdb.STATEMENT_TYPE_CREATE: "CREATE", duckdb.STATEMENT_TYPE_DROP: "DROP", duckdb.STATEMENT_TYPE_COPY: "COPY",
		duckdb.STATEMENT_TYPE_ATTACH: "ATTACH", duckdb.STATEMENT_TYPE_DETACH: "DETACH", duckdb.STATEMENT_TYPE_PRAGMA: "PRAGMA",
		duckdb.STATEMENT_TYPE_SET: "SET", duckdb.STATEMENT_TYPE_VARIABLE_SET: "SET", duckdb.STATEMENT_TYPE_LOAD: "INSTALL/LOAD",
		duckdb.STATEMENT_TYPE_CALL: "CALL", duckdb.STATEMENT_TYPE_EXPORT: "EXPORT", duckdb.STATEMENT_TYPE_ALTER: "ALTER",
		duckdb.STATEMENT_TYPE_TRANSACTION: "transaction", duckdb.STATEMENT_TYPE_PREPARE: "PREPARE", duckdb.STATEMENT_TYPE_EXECUTE: "EXECUTE",
	}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("type-%d", t)
}

// classify turns an engine failure into ErrInvalid, a LimitError, or the
// store error behind it.
func (q *query) classify(parent, qctx context.Context, err error) error {
	var le *LimitError
	if errors.As(err, &le) || errors.Is(err, ErrInvalid) {
		return err
	}
	// A scan's own limit or refusal explains DuckDB's error; a scan that
	// failed because the time limit ended the query does not.
	first := q.firstErr()
	if first != nil && (errors.As(first, &le) || errors.Is(first, ErrInvalid)) {
		return first
	}
	if parent.Err() == nil && errors.Is(qctx.Err(), context.DeadlineExceeded) {
		return q.limits.exceeded("max_query_time", q.limits.MaxTime.String(), "narrow the query (fewer rows or columns) or raise the limit")
	}
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if first != nil {
		return first
	}
	var de *duckdb.Error
	if errors.As(err, &de) {
		switch de.Type {
		case duckdb.ErrorTypeOutOfMemory:
			return q.limits.exceeded("max_memory", fmt.Sprintf("%dMB", q.limits.MaxMemoryMB), "aggregate more, select fewer columns, or raise the limit")
		case duckdb.ErrorTypeInterrupt:
			return q.limits.exceeded("max_query_time", q.limits.MaxTime.String(), "narrow the query or raise the limit")
		case duckdb.ErrorTypeFatal, duckdb.ErrorTypeInternal:
			return fmt.Errorf("sqlquery: engine failure: %w", err)
		}
		return invalidf("%s", de.Msg)
	}
	return fmt.Errorf("sqlquery: %w", err)
}
