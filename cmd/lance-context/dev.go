package main

import (
	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/devmode"
	"github.com/lance-context/lance-context/internal/gctune"
)

func newDevCmd() *cobra.Command {
	var o devmode.Options
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything on one machine: embedded etcd, a worker, a master and the web UI on one address",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := gctune.Tune(); err != nil {
				return err
			}
			return devmode.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.DataDir, "data-dir", "./lance-data", "data directory (a path or s3://bucket/prefix)")
	cmd.Flags().StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address to serve the API and UI on")
	return cmd
}
