package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
)

// newDeleteCmd deletes a whole store. The worker has no route that deletes
// single records (rows leave through retention and cleanup), so the verb
// names what the route does and asks for --yes: it cannot be undone.
func newDeleteCmd() *cobra.Command {
	var f clientFlags
	var yes bool
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a store and all its data (base table, WAL, tags); needs --yes",
		Long: "Delete a store: its base table, its WAL tail, its tags, leases and feed groups, and its name in the " +
			"registry. It cannot be undone, so the verb refuses to run without --yes. Single records are not deleted " +
			"one by one: set a row retention (see retention) and they go at the next cleanup." + clientGroupNote,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		if !yes {
			return nil, nil, fmt.Errorf("delete removes store %q and all its data for good: run again with --yes", args[0])
		}
		if err := c.DeleteStore(cmd.Context(), args[0]); err != nil {
			return nil, nil, err
		}
		return map[string]any{"deleted": args[0]}, line("deleted store %s", args[0]), nil
	})
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm: delete the store and all its data")
	return cmd
}

// newTrajectoryCmd prints the records of one rollout in turn order.
func newTrajectoryCmd() *cobra.Command {
	var f clientFlags
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "trajectory NAME ROLLOUT_ID",
		Short: "Print the records of one rollout, in sequence_order (base table and WAL)",
		Long: "Print the records of one rollout (rollout_id), merged and un-merged, ordered by sequence_order, then id: " +
			"a table, or with --json one record per line. A rollout with no records prints nothing and succeeds " +
			"(\"0 records\")." + clientGroupNote,
		Args: cobra.ExactArgs(2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		recs, err := c.Trajectory(cmd.Context(), args[0], args[1])
		if err != nil {
			return nil, nil, err
		}
		recs = nonNil(recs)
		if f.json {
			// One record per line, as list --all --json prints them.
			return nil, nil, writeJSONLines(cmd.OutOrStdout(), recs)
		}
		return nil, func(w io.Writer) error {
			tw := newRecordTable(w)
			for _, r := range recs {
				tw.add(r)
			}
			if err := tw.flush(); err != nil {
				return err
			}
			_, err := fmt.Fprintf(w, "%d records in rollout %s\n", len(recs), args[1])
			return err
		}, nil
	})
	return cmd
}

func writeJSONLines(w io.Writer, recs []api.Record) error {
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// latestRE reads the latest version out of the worker's answer to a
// checkout past it ("... (the latest is N)").
var latestRE = regexp.MustCompile(`the latest is (\d+)`)

// newCheckoutCmd pins a worker's reads of a store to a base version, or
// unpins them (--latest).
func newCheckoutCmd() *cobra.Command {
	var f clientFlags
	var latest bool
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "checkout NAME [VERSION]",
		Short: "Pin the worker's reads of a store to a base-table version (time travel), or unpin with --latest",
		Long: "Pin the answering worker's reads of a store to base-table VERSION: its reads then see the base table as " +
			"it was at that version, without the WAL tail, and cleanup keeps that version while the pin lasts. Checking out the latest version (--latest, or its number) unpins. To read one old version " +
			"without pinning the worker for everyone, pass version=N on a read instead." + clientGroupNote,
		Args: cobra.RangeArgs(1, 2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		if latest == (len(args) == 2) {
			return nil, nil, errors.New("give either a VERSION or --latest")
		}
		var v uint64
		if latest {
			n, err := latestVersion(cmd, c, args[0])
			if err != nil {
				return nil, nil, err
			}
			v = n
		} else {
			n, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || n == 0 {
				return nil, nil, fmt.Errorf("version %q: want a base-table version >= 1 (stats NAME shows the current one)", args[1])
			}
			v = n
		}
		got, err := c.Checkout(cmd.Context(), args[0], v)
		if err != nil {
			return nil, nil, err
		}
		out := api.VersionResponse{Version: got}
		if latest {
			return out, line("%s: reads follow the latest version (%d) again", args[0], got), nil
		}
		return out, line("%s: reads pinned to version %d (checkout %s --latest unpins)", args[0], got, args[0]), nil
	})
	cmd.Flags().BoolVar(&latest, "latest", false, "unpin: check out the latest version")
	return cmd
}

// latestVersion asks the worker for the store's latest base version: a
// checkout past every version is refused with a 404 that names it (while a
// pin is on, the store's statistics report the pinned version instead).
func latestVersion(cmd *cobra.Command, c *client.Client, store string) (uint64, error) {
	_, err := c.Checkout(cmd.Context(), store, math.MaxUint64)
	var ae *client.APIError
	if err == nil || !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		if err == nil {
			err = errors.New("the worker accepted a checkout past every version")
		}
		return 0, fmt.Errorf("finding the latest version of %s: %w", store, err)
	}
	m := latestRE.FindStringSubmatch(ae.Message)
	if m == nil {
		return 0, fmt.Errorf("finding the latest version of %s: %w (give the version: stats NAME shows it)", store, err)
	}
	return strconv.ParseUint(m[1], 10, 64)
}
