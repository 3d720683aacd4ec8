package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
)

// newSnapshotCmd is the snapshot verb: create, get, list, renew and
// release snapshots (base versions that hold everything the worker
// acknowledged before the call, tagged in Lance's format and leased).
func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Create, show, list, renew and release snapshots: leased, tagged base versions any Lance engine reads",
		Long: "A snapshot is a version of a store's base table that holds everything the worker acknowledged " +
			"before the call (its pending rows are flushed and merged first), named by a tag in Lance's format " +
			"and kept from cleanup by a lease until it expires or is released. Ray, Spark, DuckDB, LanceDB and " +
			"pylance read it at its uri, by version or by tag. With several workers, a snapshot may exclude what " +
			"other live workers had not merged: the answer lists those shards (deploy/SCALING.md)." + clientGroupNote,
	}
	var fc, fg, fl, fr, fd clientFlags
	var ttl, renewTTL time.Duration
	var holder string

	create := clientVerb(&fc, &cobra.Command{
		Use:   "create NAME",
		Short: "Make a snapshot of a store (flushes and merges what is pending)",
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		secs, err := ttlSeconds(ttl)
		if err != nil {
			return nil, nil, err
		}
		sn, err := c.CreateSnapshot(cmd.Context(), args[0], secs, holder)
		if err != nil {
			return nil, nil, err
		}
		return sn, snapshotText("created snapshot of "+args[0], sn), nil
	})
	create.Flags().DurationVar(&ttl, "ttl", 0, "how long the lease keeps the snapshot (e.g. 2h; default: the worker's, an hour; at most 168h)")
	create.Flags().StringVar(&holder, "holder", "", "who holds the snapshot (free text, shown in listings)")
	cmd.AddCommand(create)

	cmd.AddCommand(clientVerb(&fg, &cobra.Command{
		Use:   "get NAME ID",
		Short: "Show a live snapshot",
		Args:  cobra.ExactArgs(2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		sn, err := c.Snapshot(cmd.Context(), args[0], args[1])
		if err != nil {
			return nil, nil, err
		}
		return sn, snapshotText("snapshot of "+args[0], sn), nil
	}))

	cmd.AddCommand(clientVerb(&fl, &cobra.Command{
		Use:   "list NAME",
		Short: "List a store's live snapshots, oldest version first",
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		sns, err := c.Snapshots(cmd.Context(), args[0])
		if err != nil {
			return nil, nil, err
		}
		return api.SnapshotsResponse{Snapshots: sns}, func(w io.Writer) error {
			if len(sns) == 0 {
				_, err := fmt.Fprintf(w, "no live snapshots of %s\n", args[0])
				return err
			}
			if _, err := fmt.Fprintln(w, "ID\tVERSION\tTAG\tEXPIRES\tHOLDER\tURI"); err != nil {
				return err
			}
			for _, sn := range sns {
				if _, err := fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", sn.ID, sn.Version, sn.Tag,
					sn.Lease.ExpiresAt.UTC().Format(time.RFC3339), sn.Holder, sn.URI); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}))

	renew := clientVerb(&fr, &cobra.Command{
		Use:   "renew NAME ID",
		Short: "Extend a live snapshot's lease to --ttl from now",
		Args:  cobra.ExactArgs(2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		secs, err := ttlSeconds(renewTTL)
		if err != nil {
			return nil, nil, err
		}
		sn, err := c.RenewSnapshot(cmd.Context(), args[0], args[1], secs)
		if err != nil {
			return nil, nil, err
		}
		return sn, snapshotText("renewed snapshot of "+args[0], sn), nil
	})
	renew.Flags().DurationVar(&renewTTL, "ttl", 0, "the lease's new time to live from now (default: an hour; at most 168h)")
	cmd.AddCommand(renew)

	cmd.AddCommand(clientVerb(&fd, &cobra.Command{
		Use:   "release NAME ID",
		Short: "Release a snapshot: its tag is deleted and its version becomes subject to cleanup",
		Args:  cobra.ExactArgs(2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		if err := c.ReleaseSnapshot(cmd.Context(), args[0], args[1]); err != nil {
			return nil, nil, err
		}
		return map[string]string{"released": args[1]}, line("released snapshot %s of %s", args[1], args[0]), nil
	}))
	return cmd
}

// ttlSeconds turns a --ttl flag into the wire's whole seconds (0: the
// worker's default).
func ttlSeconds(d time.Duration) (int64, error) {
	if d < 0 || (d > 0 && d < time.Second) || d%time.Second != 0 {
		return 0, fmt.Errorf("--ttl %v: want a whole number of seconds, at least 1s", d)
	}
	return int64(d / time.Second), nil
}

// snapshotText prints a snapshot: where to read it and what keeps it.
func snapshotText(head string, sn *api.Snapshot) textFunc {
	return func(w io.Writer) error {
		var b []byte
		b = fmt.Appendf(b, "%s\n  uri:     %s\n  version: %d\n  tag:     %s\n  lease:   %s (expires %s)\n",
			head, sn.URI, sn.Version, sn.Tag, sn.Lease.ID, sn.Lease.ExpiresAt.UTC().Format(time.RFC3339))
		if sn.Holder != "" {
			b = fmt.Appendf(b, "  holder:  %s\n", sn.Holder)
		}
		for _, x := range sn.ExcludedShards {
			b = fmt.Appendf(b, "  excluded: shard %s (instance %q): %d pending generations, %d rows not in this version\n",
				x.ShardID, x.InstanceID, x.PendingGenerations, x.PendingRows)
		}
		_, err := w.Write(b)
		return err
	}
}
