// Command mkcontainer waits until a GCS or Azure Blob emulator answers and
// makes sure a bucket (GCS) or container (Azure) exists. scripts/fakegcs.sh
// and scripts/azurite.sh run it; the endpoint and credentials come from the
// environment, as for objstore.Open (STORAGE_EMULATOR_HOST;
// AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY
// and AZURE_STORAGE_ENDPOINT).
//
//	go run ./objstore/internal/mkcontainer [-wait 30s] gs://BUCKET | az://CONTAINER
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/lance-context/lance-context/objstore/azure"
	"github.com/lance-context/lance-context/objstore/gcs"
)

func main() {
	wait := flag.Duration("wait", 30*time.Second, "how long to wait for the server")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: mkcontainer [-wait DURATION] gs://BUCKET | az://CONTAINER")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	var create func(context.Context) error
	switch u := flag.Arg(0); {
	case strings.HasPrefix(u, "gs://"):
		create = func(ctx context.Context) error { return gcsBucket(ctx, strings.TrimPrefix(u, "gs://")) }
	case strings.HasPrefix(u, "az://"):
		create = func(ctx context.Context) error { return azContainer(ctx, strings.TrimPrefix(u, "az://")) }
	default:
		fmt.Fprintln(os.Stderr, "mkcontainer: want gs://BUCKET or az://CONTAINER")
		os.Exit(2)
	}
	for {
		err := create(ctx)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "mkcontainer:", err)
			os.Exit(1)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func gcsBucket(ctx context.Context, name string) error {
	cfg := gcs.ConfigFromEnv()
	if cfg.Endpoint == "" {
		return errors.New("STORAGE_EMULATOR_HOST is not set")
	}
	ep := cfg.Endpoint
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	c, err := storage.NewClient(ctx, option.WithEndpoint(strings.TrimSuffix(ep, "/")+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		return err
	}
	defer c.Close()
	// Emulators accept any project id; GCS itself needs the real one.
	err = c.Bucket(name).Create(ctx, "lc-test-project", nil)
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == 409 {
		return nil // exists
	}
	return err
}

func azContainer(ctx context.Context, name string) error {
	cfg := azure.ConfigFromEnv()
	var (
		c   *container.Client
		err error
	)
	if cfg.ConnectionString != "" {
		c, err = container.NewClientFromConnectionString(cfg.ConnectionString, name, nil)
	} else {
		var cred *container.SharedKeyCredential
		if cred, err = container.NewSharedKeyCredential(cfg.Account, cfg.Key); err == nil {
			c, err = container.NewClientWithSharedKeyCredential(strings.TrimSuffix(cfg.Endpoint, "/")+"/"+name, cred, nil)
		}
	}
	if err != nil {
		return err
	}
	_, err = c.Create(ctx, nil)
	if bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return nil
	}
	return err
}
