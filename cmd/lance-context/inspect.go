package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

func newInspectCmd() *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:   "inspect TABLE_URL",
		Short: "Print a Lance table's version, schema, fragments and config (a path or s3://bucket/prefix)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := objstore.Open(ctx, args[0])
			if err != nil {
				return err
			}
			var d *table.Dataset
			if version > 0 {
				d, err = table.Checkout(ctx, store, version)
			} else {
				d, err = table.Open(ctx, store)
			}
			if err != nil {
				return err
			}
			type frag struct {
				ID, PhysicalRows, Deleted uint64
				Files                     []string
			}
			out := struct {
				Version   uint64            `json:"version"`
				Rows      int64             `json:"rows"`
				Schema    string            `json:"schema"`
				Fragments []frag            `json:"fragments"`
				Config    map[string]string `json:"config,omitempty"`
				Indexes   bool              `json:"has_index_section"`
			}{Version: d.Version(), Rows: d.CountRows(), Schema: d.Schema().Arrow().String(), Config: d.Config(), Indexes: d.HasIndexSection()}
			for _, f := range d.Fragments() {
				fr := frag{ID: f.GetId(), PhysicalRows: f.GetPhysicalRows(), Deleted: f.GetDeletionFile().GetNumDeletedRows()}
				for _, df := range f.GetFiles() {
					fr.Files = append(fr.Files, df.GetPath())
				}
				out.Fragments = append(out.Fragments, fr)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if err := enc.Encode(out); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "read this version instead of the latest")
	return cmd
}
