package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// arrowStream is the media type of an Arrow IPC stream.
const arrowStream = "application/vnd.apache.arrow.stream"

func newSQLCmd() *cobra.Command {
	var f clientFlags
	var store, source, format string
	var maxRows int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "sql --store NAME [--source fragments|wal|all] [--format table|json|arrow] \"SELECT ...\"",
		Short: "Run a read-only SQL query over a store (table records) and the other stores (by name)",
		Long: `Run one read-only SQL statement on the master (or dev) at --url. The store
named by --store is the table records; any other store is a table of its own
name (double-quote names with a dot or dash). --source picks the tier read:
fragments (merged, default), wal (pending only) or all.

--format table prints aligned columns, json the server's JSON answer, arrow the
result as an Arrow IPC stream (pipe it to a file and read it with pyarrow or
polars). --max-rows truncates the result instead of failing when it is larger
than the server's row limit.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if store == "" {
				return fmt.Errorf("--store is required: the store queried as the table records")
			}
			if f.json {
				format = "json"
			}
			if format != "table" && format != "json" && format != "arrow" {
				return fmt.Errorf("--format must be table, json or arrow, got %q", format)
			}
			body, err := json.Marshal(map[string]any{"sql": args[0], "source": source, "max_rows": maxRows})
			if err != nil {
				return err
			}
			base := strings.TrimRight(f.url, "/")
			if !strings.Contains(base, "://") {
				base = "http://" + base
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost,
				base+"/api/v1/experiments/"+url.PathEscape(store)+"/query", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("User-Agent", "lance-context-cli/"+version)
			if format == "arrow" {
				req.Header.Set("Accept", arrowStream)
			} else {
				req.Header.Set("Accept", "application/json")
			}
			if f.token != "" {
				req.Header.Set("Authorization", "Bearer "+f.token)
			}
			resp, err := (&http.Client{Timeout: timeout}).Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				var e struct {
					Error struct{ Code, Message string } `json:"error"`
				}
				if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
					return fmt.Errorf("%d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
				}
				return fmt.Errorf("%d: %s", resp.StatusCode, bytes.TrimSpace(raw))
			}
			out := cmd.OutOrStdout()
			if format != "table" {
				_, err := io.Copy(out, resp.Body)
				return err
			}
			var res struct {
				Columns []struct{ Name, Type string } `json:"columns"`
				Rows    [][]any                       `json:"rows"`
				Count   int                           `json:"row_count"`
				Trunc   bool                          `json:"truncated"`
				Scanned int64                         `json:"rows_scanned"`
				Elapsed float64                       `json:"elapsed_ms"`
			}
			dec := json.NewDecoder(resp.Body)
			dec.UseNumber()
			if err := dec.Decode(&res); err != nil {
				return fmt.Errorf("decode the answer: %w", err)
			}
			return printTable(out, res.Columns, res.Rows, fmt.Sprintf("(%d rows%s; %d scanned; %.1f ms)",
				res.Count, map[bool]string{true: ", truncated", false: ""}[res.Trunc], res.Scanned, res.Elapsed))
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&store, "store", "", "the store queried as the table records")
	cmd.Flags().StringVar(&source, "source", "fragments", "tier read: fragments, wal or all")
	cmd.Flags().StringVar(&format, "format", "table", "output: table, json or arrow (an Arrow IPC stream)")
	cmd.Flags().IntVar(&maxRows, "max-rows", 0, "truncate the result to this many rows instead of failing at the server's limit")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "request timeout")
	return cmd
}

func printTable(w io.Writer, cols []struct{ Name, Type string }, rows [][]any, footer string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c.Name)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		for i, v := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, cell(v))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, footer)
	return err
}

// cell renders one value on one line: NULL for null, JSON for lists and
// structs, strings cut at 80 characters.
func cell(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		s = x
	case json.Number:
		s = x.String()
	case bool:
		s = fmt.Sprint(x)
	default:
		b, _ := json.Marshal(x)
		s = string(b)
	}
	s = strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
	if r := []rune(s); len(r) > 80 {
		s = string(r[:79]) + "…"
	}
	return s
}
