package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/wal"
)

func newWALCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wal",
		Short: "Check and repair a store's write-ahead log",
	}
	cmd.AddCommand(newWALRepairCmd())
	return cmd
}

func newWALRepairCmd() *cobra.Command {
	var dataDir, store, shard, instance string
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "repair --data-dir DIR --store NAME [--shard ID | --instance-id ID] [--dry-run]",
		Short: "Truncate a corrupt shard WAL at its damage, printing every entry that is lost",
		Long: `repair reads the WAL of a store's shards as a claim replays it. A shard
whose log is damaged in the middle (a bad frame or entry followed by valid
ones) refuses to be claimed: its worker answers writes to the store with
503 WAL_CORRUPT and lists it in /api/v1/health. repair truncates such a
log at the damage (the damaged segment at the offset, later segments at
their first frame from the damaged position on, object entries from that
position on) and prints the position, place and row count of every valid
entry behind the damage, which are lost. Everything before the damage is
kept; the worker's next write (at most 30 s later) claims the shard again.

Stop writing to the store first (the worker refuses writes meanwhile).
Without --shard or --instance-id every shard of the store is checked.
--dry-run prints the same report and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" || store == "" {
				return errors.New("--data-dir and --store are required")
			}
			if shard != "" && instance != "" {
				return errors.New("give --shard or --instance-id, not both")
			}
			if err := rollout.ValidateName(store); err != nil {
				return err
			}
			ctx := cmd.Context()
			root, err := objstore.Open(ctx, dataDir)
			if err != nil {
				return fmt.Errorf("open data dir %s: %w", dataDir, err)
			}
			sr := rollout.StoreRoot(root, store)
			shards := []string{shard}
			switch {
			case instance != "":
				shards = []string{rollout.ShardID(instance)}
			case shard == "":
				if shards, err = wal.ListShards(ctx, sr); err != nil {
					return err
				}
				if len(shards) == 0 {
					return fmt.Errorf("store %q has no WAL shards under %s", store, dataDir)
				}
			}
			var reports []*wal.RepairReport
			for _, sh := range shards {
				rep, err := wal.Repair(ctx, sr, rollout.WALLog(root, store), sh, dryRun)
				if err != nil {
					return fmt.Errorf("shard %s: %w", sh, err)
				}
				reports = append(reports, rep)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(reports)
			}
			for _, rep := range reports {
				printRepair(cmd.OutOrStdout(), store, rep)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "the workers' data directory (a path or s3://bucket/prefix)")
	f.StringVar(&store, "store", "", "the store (rollout) name")
	f.StringVar(&shard, "shard", "", "the shard id (default: every shard of the store)")
	f.StringVar(&instance, "instance-id", "", "the worker's INSTANCE_ID, instead of --shard")
	f.BoolVar(&dryRun, "dry-run", false, "report the damage and what would be lost; change nothing")
	f.BoolVar(&asJSON, "json", false, "print the reports as JSON")
	return cmd
}

func printRepair(w io.Writer, store string, rep *wal.RepairReport) {
	if rep.Damage == nil {
		fmt.Fprintf(w, "store %s shard %s: the WAL is sound; nothing to repair\n", store, rep.Shard)
		return
	}
	d := rep.Damage
	verb := "repaired"
	if rep.DryRun {
		verb = "damaged (dry run: nothing changed)"
	}
	fmt.Fprintf(w, "store %s shard %s: %s\n  damage: position %d, %s offset %d: %s\n", store, rep.Shard, verb, d.Position, d.Segment, d.Offset, d.Reason)
	fmt.Fprintf(w, "  lost: %d entries, %d rows", len(rep.Lost), rep.LostRows)
	if n := len(rep.Lost); n > 0 {
		fmt.Fprintf(w, " (positions %d to %d)", rep.Lost[0].Position, rep.Lost[n-1].Position)
	}
	fmt.Fprintln(w)
	for _, l := range rep.Lost {
		rows := fmt.Sprint(l.Rows)
		if l.Rows < 0 {
			rows = "unknown (the entry does not decode)"
		}
		fmt.Fprintf(w, "    position %d: %s rows, at %s\n", l.Position, rows, l.Where)
	}
	for _, a := range rep.Actions {
		fmt.Fprintf(w, "  %s\n", a)
	}
}
