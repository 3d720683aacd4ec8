// Command lance-context is the one binary of lance-context: the worker, the
// master, the all-in-one dev mode, client verbs, and tools for inspecting
// Lance tables. The benchmarks are a binary of their own
// (bench/cmd/lance-context-bench).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/buildinfo"
	"github.com/lance-context/lance-context/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	// The format layer's I/O and index cache settings (LC_IO_CONCURRENCY,
	// LC_INDEX_CACHE_BYTES, LC_INDEX_PREWARM), read once for every verb:
	// the stores and readers this process opens share what they build.
	config.FormatFromEnv().Install()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "lance-context",
		Short:         "A durable store for reinforcement-learning rollouts on Lance tables",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newDevCmd(), newWorkerCmd(), newMasterCmd(), newInspectCmd(), newWALCmd())
	root.AddCommand(clientCmds()...)
	root.AddCommand(newSQLCmd())                                          // sql.go
	root.AddCommand(newExportCmd())                                       // export.go
	root.AddCommand(newSnapshotCmd())                                     // snapshot.go
	root.AddCommand(newDeleteCmd(), newTrajectoryCmd(), newCheckoutCmd()) // store_cmds.go
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version: the module version and the commit it was built from",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "lance-context", buildinfo.Version())
		},
	}
}
