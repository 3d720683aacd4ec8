// Command lance-context-bench runs the benchmark verbs (table, engine, http,
// master; package bench). They live in a binary of their own so that the
// service binary, lance-context, links no benchmark code.
//
//	go build -o bin/lance-context-bench ./bench/cmd/lance-context-bench
//	bin/lance-context-bench table --rows 1000000
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/lance-context/lance-context/bench"
	"github.com/lance-context/lance-context/internal/config"
	_ "github.com/lance-context/lance-context/objstore/drivers" // s3://, gs://, az:// for the engine bench
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	config.FormatFromEnv().Install() // as the service binary does: the same I/O and cache settings
	cmd := bench.Command()
	cmd.Use = "lance-context-bench"
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
