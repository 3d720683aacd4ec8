package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/buildinfo"
	"github.com/lance-context/lance-context/client"
)

// defaultURL is the address of the all-in-one dev mode.
const defaultURL = "http://127.0.0.1:8080"

// clientFlags are the flags every client verb takes.
type clientFlags struct {
	url, token string
	json       bool
}

func (f *clientFlags) register(cmd *cobra.Command) {
	u := os.Getenv("LC_URL")
	if u == "" {
		u = defaultURL
	}
	cmd.Flags().StringVar(&f.url, "url", u, "API base URL (env LC_URL)")
	cmd.Flags().StringVar(&f.token, "token", os.Getenv("LC_API_TOKEN"), "bearer token (env LC_API_TOKEN)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON instead of text")
}

func (f *clientFlags) client() *client.Client {
	return client.New(f.url, client.WithToken(f.token), client.WithUserAgent("lance-context-cli/"+buildinfo.Version()))
}

// textFunc prints a verb's answer as text.
type textFunc func(w io.Writer) error

// line is a textFunc printing one formatted line.
func line(format string, args ...any) textFunc {
	return func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format+"\n", args...)
		return err
	}
}

// clientVerb completes cmd as a client verb: it registers the common flags
// into f, and its RunE calls run with a client and prints what run returns
// (out as one line of JSON with --json, else text; nothing when both are
// nil, for a verb that printed as it went).
func clientVerb(f *clientFlags, cmd *cobra.Command, run func(cmd *cobra.Command, c *client.Client, args []string) (out any, text textFunc, err error)) *cobra.Command {
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		out, text, err := run(cmd, f.client(), args)
		if err != nil || (out == nil && text == nil) {
			return err
		}
		w := cmd.OutOrStdout()
		if f.json {
			return json.NewEncoder(w).Encode(out)
		}
		return text(w)
	}
	f.register(cmd)
	return cmd
}

// clientCmds are the verbs that call a running worker.
func clientCmds() []*cobra.Command {
	return []*cobra.Command{
		newCreateCmd(), newStoresCmd(), newAppendCmd(), newListCmd(), newGetCmd(),
		newBlobCmd(), newStatsCmd(), newFlushCmd(), newMergeCmd(), newCompactCmd(), newCleanupCmd(), newTagCmd(), newRetentionCmd(),
	}
}

const clientGroupNote = "\n\nTalks to a running worker at --url (env LC_URL, default " + defaultURL + ") with --token (env LC_API_TOKEN)."

func newCreateCmd() *cobra.Command {
	var f clientFlags
	return clientVerb(&f, &cobra.Command{
		Use:   "create NAME",
		Short: "Create a rollout store",
		Long:  "Create a rollout store." + clientGroupNote,
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		info, err := c.CreateStore(cmd.Context(), args[0])
		if err != nil {
			return nil, nil, err
		}
		return info, line("created %s", info.Name), nil
	})
}

func newStoresCmd() *cobra.Command {
	var f clientFlags
	return clientVerb(&f, &cobra.Command{
		Use:   "stores",
		Short: "List the rollout stores",
		Long:  "List the rollout stores, one name a line." + clientGroupNote,
		Args:  cobra.NoArgs,
	}, func(cmd *cobra.Command, c *client.Client, _ []string) (any, textFunc, error) {
		stores, err := c.ListStores(cmd.Context())
		if err != nil {
			return nil, nil, err
		}
		return api.ListStoresResponse{Stores: stores, Count: len(stores)}, func(w io.Writer) error {
			for _, st := range stores {
				if _, err := fmt.Fprintln(w, st.Name); err != nil {
					return err
				}
			}
			return nil
		}, nil
	})
}

func newAppendCmd() *cobra.Command {
	var f clientFlags
	var batch int
	var flush bool
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "append NAME [FILE|-]",
		Short: "Append records from JSON lines (one record object a line) in FILE or stdin",
		Long: `Append records read as JSON lines, one record object a line (blank lines are
skipped), from FILE or stdin ("-" or no FILE). Records are sent in batches of
--batch; records without an "id" get one before they are sent, so the client's
retries are idempotent. binary_payload is base64; metadata may be any JSON
value. With --flush the last batch is flushed, so everything appended is
readable (source wal or all) when the command returns.` + clientGroupNote,
		Args: cobra.RangeArgs(1, 2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		if batch < 1 {
			return nil, nil, fmt.Errorf("--batch must be at least 1")
		}
		in := cmd.InOrStdin()
		src := "stdin"
		if len(args) == 2 && args[1] != "-" {
			file, err := os.Open(args[1])
			if err != nil {
				return nil, nil, err
			}
			defer file.Close()
			in, src = file, args[1]
		}
		store := args[0]
		rd := &jsonLines{r: bufio.NewReaderSize(in, 1<<20), name: src}
		var ids []string
		flushed := false
		for {
			recs, eof, err := rd.next(batch)
			if err != nil {
				return nil, nil, fmt.Errorf("%w (%d records appended before)", err, len(ids))
			}
			if len(recs) > 0 {
				res, err := c.Append(cmd.Context(), store, recs, client.AppendOptions{Flush: flush && eof})
				if err != nil {
					return nil, nil, fmt.Errorf("appending records %d-%d: %w (%d records appended before)", len(ids)+1, len(ids)+len(recs), err, len(ids))
				}
				ids = append(ids, res.IDs...)
				flushed = res.Flushed
			}
			if eof {
				break
			}
		}
		if len(ids) == 0 {
			return nil, nil, fmt.Errorf("no records in %s", src)
		}
		if flush && !flushed {
			// The input ended on a batch boundary: flush on its own.
			if err := c.Flush(cmd.Context(), store); err != nil {
				return nil, nil, fmt.Errorf("%d records appended (durable), but the flush failed: %w", len(ids), err)
			}
			flushed = true
		}
		note := "durable; readable after the next flush"
		if flushed {
			note = "flushed: readable now"
		}
		return map[string]any{"ids": ids, "count": len(ids), "flushed": flushed}, line("appended %d records to %s (%s)", len(ids), store, note), nil
	})
	cmd.Flags().IntVar(&batch, "batch", 500, "records per request")
	cmd.Flags().BoolVar(&flush, "flush", false, "flush after the last batch so the records are readable at once")
	return cmd
}

// jsonLines reads records, one JSON object a line.
type jsonLines struct {
	r    *bufio.Reader
	name string
	line int
}

// next reads up to n records; eof is true when the input is exhausted.
func (j *jsonLines) next(n int) (recs []api.Record, eof bool, err error) {
	for len(recs) < n {
		b, rerr := j.r.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, false, fmt.Errorf("reading %s: %w", j.name, rerr)
		}
		if len(b) > 0 {
			j.line++
			if b = bytes.TrimSpace(b); len(b) > 0 {
				var rec api.Record
				if err := json.Unmarshal(b, &rec); err != nil {
					return nil, false, fmt.Errorf("%s line %d: not a record: %v", j.name, j.line, err)
				}
				recs = append(recs, rec)
			}
		}
		if rerr == io.EOF {
			return recs, true, nil
		}
	}
	// Look ahead so a batch that ends the input is known to be the last.
	for {
		b, perr := j.r.Peek(1)
		if len(b) == 0 || perr != nil {
			return recs, true, nil
		}
		if b[0] != '\n' && b[0] != '\r' && b[0] != ' ' && b[0] != '\t' {
			return recs, false, nil
		}
		if b[0] == '\n' {
			j.line++
		}
		_, _ = j.r.ReadByte()
	}
}

func newListCmd() *cobra.Command {
	var f clientFlags
	var source string
	var limit, offset int
	var cursor string
	var filters []string
	var all bool
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "list NAME",
		Short: "List records of a store (a page, or --all)",
		Long: `List records of a store, in id order. --source all (merged and un-merged rows,
a worker's default), fragments (the merged base table) or wal (flushed, not yet
merged). --filter COLUMN=VALUE (repeatable) on id, rollout_id, problem_id,
dataset, role, content_type, policy_version, artifact_type, include_in_training.
--cursor continues after a page (its next_cursor); --all follows cursors to the
end. --json prints one page object ({"records",...}), or with --all one record
per line.` + clientGroupNote,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		o := client.ListOptions{Source: api.Source(source), Limit: limit, Offset: offset, Cursor: cursor, Filters: map[string]string{}}
		for _, kv := range filters {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, nil, fmt.Errorf("--filter %q: want COLUMN=VALUE", kv)
			}
			o.Filters[k] = v
		}
		w := cmd.OutOrStdout()
		if all {
			enc := json.NewEncoder(w)
			var tw *recordTable
			if !f.json {
				tw = newRecordTable(w)
			}
			n := 0
			for rec, err := range c.Iterate(cmd.Context(), args[0], o) {
				if err != nil {
					if tw != nil {
						_ = tw.flush()
					}
					return nil, nil, err
				}
				n++
				if f.json {
					if err := enc.Encode(rec); err != nil {
						return nil, nil, err
					}
				} else {
					tw.add(rec)
				}
			}
			if tw != nil {
				if err := tw.flush(); err != nil {
					return nil, nil, err
				}
				fmt.Fprintf(w, "%d records (source %s)\n", n, sourceName(o.Source))
			}
			return nil, nil, nil
		}
		page, err := c.List(cmd.Context(), args[0], o)
		if err != nil {
			return nil, nil, err
		}
		page.Records = nonNil(page.Records)
		return page, func(w io.Writer) error {
			tw := newRecordTable(w)
			for _, r := range page.Records {
				tw.add(r)
			}
			if err := tw.flush(); err != nil {
				return err
			}
			more := ""
			if page.HasMore {
				more = fmt.Sprintf("; more: --cursor %s, or --all", page.NextCursor)
			}
			_, err := fmt.Fprintf(w, "%d records (source %s, offset %d%s)\n", len(page.Records), page.Source, page.Offset, more)
			return err
		}, nil
	})
	cmd.Flags().StringVar(&source, "source", "", "all, fragments or wal (default: the server's, all on a worker)")
	cmd.Flags().IntVar(&limit, "limit", 25, "records per page (1-1000)")
	cmd.Flags().IntVar(&offset, "offset", 0, "records to skip")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue after the page whose next_cursor this is")
	cmd.Flags().StringArrayVar(&filters, "filter", nil, "COLUMN=VALUE equality filter (repeatable)")
	cmd.Flags().BoolVar(&all, "all", false, "fetch every page")
	return cmd
}

func sourceName(s api.Source) string {
	if s == "" {
		return "the server's default"
	}
	return string(s)
}

func nonNil(recs []api.Record) []api.Record {
	if recs == nil {
		return []api.Record{}
	}
	return recs
}

// recordTable prints records as aligned columns.
type recordTable struct {
	tw *tabwriter.Writer
}

func newRecordTable(w io.Writer) *recordTable {
	t := &recordTable{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	fmt.Fprintln(t.tw, "ID\tROLLOUT_ID\tSEQ\tROLE\tCREATED_AT\tREWARD\tCONTENT")
	return t
}

func (t *recordTable) add(r api.Record) {
	created, reward, content := "", "", ""
	if r.CreatedAt != nil {
		created = r.CreatedAt.UTC().Format(time.RFC3339)
	}
	if r.Reward != nil {
		reward = fmt.Sprint(*r.Reward)
	}
	switch {
	case r.Content != nil:
		content = *r.Content
	case r.PayloadSize != nil:
		content = fmt.Sprintf("<%d-byte payload>", *r.PayloadSize)
	}
	fmt.Fprintf(t.tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.RolloutID, r.SequenceOrder, r.Role, created, reward, oneLine(content, 60))
}

func (t *recordTable) flush() error { return t.tw.Flush() }

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func newGetCmd() *cobra.Command {
	var f clientFlags
	return clientVerb(&f, &cobra.Command{
		Use:   "get NAME ID",
		Short: "Print one record (without its payload: see blob)",
		Long:  "Print one record, the newest write of its id, as indented JSON (one line with --json)." + clientGroupNote,
		Args:  cobra.ExactArgs(2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		rec, err := c.Get(cmd.Context(), args[0], args[1])
		if err != nil {
			return nil, nil, err
		}
		return rec, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(rec)
		}, nil
	})
}

func newBlobCmd() *cobra.Command {
	var f clientFlags
	var output string
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "blob NAME ID",
		Short: "Write a record's binary payload to stdout or -o FILE",
		Long:  "Write a record's binary payload to stdout, or to -o FILE (then print what was written)." + clientGroupNote,
		Args:  cobra.ExactArgs(2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		rc, ctype, err := c.OpenBlob(cmd.Context(), args[0], args[1])
		if err != nil {
			return nil, nil, err
		}
		defer rc.Close()
		if output == "" || output == "-" {
			_, err := io.Copy(cmd.OutOrStdout(), rc)
			return nil, nil, err
		}
		file, err := os.Create(output)
		if err != nil {
			return nil, nil, err
		}
		n, err := io.Copy(file, rc)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(output)
			return nil, nil, fmt.Errorf("writing %s: %w", output, err)
		}
		return map[string]any{"file": output, "bytes": n, "content_type": ctype}, line("wrote %d bytes (%s) to %s", n, ctype, output), nil
	})
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to FILE instead of stdout")
	return cmd
}

func newStatsCmd() *cobra.Command {
	var f clientFlags
	return clientVerb(&f, &cobra.Command{
		Use:   "stats NAME",
		Short: "Print a store's rows, fragments, version and WAL backlog",
		Long:  "Print a store's statistics (from manifests only)." + clientGroupNote,
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		st, err := c.Stats(cmd.Context(), args[0])
		if err != nil {
			return nil, nil, err
		}
		return st, func(w io.Writer) error {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			ts := func(t *time.Time) string {
				if t == nil {
					return "-"
				}
				return t.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "name\t%s\n", st.Name)
			fmt.Fprintf(tw, "rows\t%d (base %d, pending %d)\n", st.Rows, st.BaseRows, st.PendingRows)
			fmt.Fprintf(tw, "unflushed rows\t%d (this worker)\n", st.UnflushedRows)
			fmt.Fprintf(tw, "pending generations\t%d\n", st.PendingGenerations)
			fmt.Fprintf(tw, "fragments\t%d\n", st.Fragments)
			fmt.Fprintf(tw, "version\t%d\n", st.Version)
			fmt.Fprintf(tw, "last updated\t%s\n", ts(st.LastUpdated))
			fmt.Fprintf(tw, "last compaction\t%s\n", ts(st.LastCompaction))
			shards := append([]api.ShardStats(nil), st.Shards...)
			sort.Slice(shards, func(i, j int) bool { return shards[i].ShardID < shards[j].ShardID })
			for _, sh := range shards {
				fmt.Fprintf(tw, "shard %s\t%d pending generations, %d pending rows, epoch %d, watermark %d\n", sh.ShardID, sh.PendingGenerations, sh.PendingRows, sh.Epoch, sh.Watermark)
			}
			return tw.Flush()
		}, nil
	})
}

func newFlushCmd() *cobra.Command {
	var f clientFlags
	return clientVerb(&f, &cobra.Command{
		Use:   "flush NAME",
		Short: "Seal the worker's buffered rows of a store so they are readable",
		Long:  "Seal the worker's buffered rows of a store so they are readable (source wal or all)." + clientGroupNote,
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		if err := c.Flush(cmd.Context(), args[0]); err != nil {
			return nil, nil, err
		}
		return map[string]any{"flushed": true}, line("flushed %s", args[0]), nil
	})
}

func newMergeCmd() *cobra.Command {
	var f clientFlags
	return clientVerb(&f, &cobra.Command{
		Use:   "merge NAME",
		Short: "Fold the worker's flushed rows of a store into its base table (one pass)",
		Long:  "Run one merge pass of the worker's shard: seal buffered rows and fold pending generations into the base table. Repeat while generations remain." + clientGroupNote,
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		res, err := c.Merge(cmd.Context(), args[0])
		if err != nil {
			return nil, nil, err
		}
		return res, line("merged %d generations, %d rows (%d replaced) into %s; base version %d; %d generations remain",
			res.Generations, res.Rows, res.Replaced, args[0], res.BaseVersion, res.Remaining), nil
	})
}

func newCompactCmd() *cobra.Command {
	var f clientFlags
	return clientVerb(&f, &cobra.Command{
		Use:   "compact NAME",
		Short: "Rewrite a store's small base-table fragments into fewer large ones",
		Long:  "Compact a store's base table: bin-pack small fragments and fragments with deletions." + clientGroupNote,
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		res, err := c.Compact(cmd.Context(), args[0], nil)
		if err != nil {
			return nil, nil, err
		}
		return res, line("compacted %s: %d fragments removed, %d added; version %d", args[0], res.FragmentsRemoved, res.FragmentsAdded, res.Version), nil
	})
}
