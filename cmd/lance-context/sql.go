package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
)

func newSQLCmd() *cobra.Command {
	var f clientFlags
	var store, source, format string
	var maxRows int
	var timeout time.Duration
	cmd := clientVerb(&f, &cobra.Command{
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
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		if store == "" {
			return nil, nil, fmt.Errorf("--store is required: the store queried as the table records")
		}
		if format != "table" && format != "json" && format != "arrow" {
			return nil, nil, fmt.Errorf("--format must be table, json or arrow, got %q", format)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		q := api.QueryRequest{SQL: args[0], Source: api.Source(source), MaxRows: maxRows}
		if format == "arrow" {
			rc, _, err := c.OpenQueryArrow(ctx, store, q)
			if err != nil {
				return nil, nil, err
			}
			defer rc.Close()
			_, err = io.Copy(cmd.OutOrStdout(), rc)
			return nil, nil, err
		}
		res, err := c.Query(ctx, store, q)
		if err != nil {
			return nil, nil, err
		}
		return res, func(w io.Writer) error {
			if format == "json" {
				return json.NewEncoder(w).Encode(res)
			}
			trunc := ""
			if res.Truncated {
				trunc = ", truncated"
			}
			return printTable(w, res.Columns, res.Rows, fmt.Sprintf("(%d rows%s; %d scanned; %.1f ms)",
				res.RowCount, trunc, res.RowsScanned, res.ElapsedMS))
		}, nil
	})
	cmd.Flags().StringVar(&store, "store", "", "the store queried as the table records")
	cmd.Flags().StringVar(&source, "source", "fragments", "tier read: fragments, wal or all")
	cmd.Flags().StringVar(&format, "format", "table", "output: table, json or arrow (an Arrow IPC stream)")
	cmd.Flags().IntVar(&maxRows, "max-rows", 0, "truncate the result to this many rows instead of failing at the server's limit")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "request timeout")
	return cmd
}

func printTable(w io.Writer, cols []api.QueryColumn, rows [][]any, footer string) error {
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
