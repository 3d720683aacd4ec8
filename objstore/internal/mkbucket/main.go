// Command mkbucket waits until an S3-compatible server answers and makes sure
// a bucket exists. scripts/versitygw.sh runs it; the endpoint, region and
// credentials come from the usual AWS_* environment variables.
//
//	go run ./objstore/internal/mkbucket [-wait 30s] BUCKET
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	s3store "github.com/lance-context/lance-context/objstore/s3"
)

func main() {
	wait := flag.Duration("wait", 30*time.Second, "how long to wait for the server")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: mkbucket [-wait DURATION] BUCKET")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *wait); err != nil {
		fmt.Fprintln(os.Stderr, "mkbucket:", err)
		os.Exit(1)
	}
}

func run(bucket string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	env := s3store.ConfigFromEnv()
	if env.Region == "" {
		env.Region = "us-east-1"
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(env.Region))
	if err != nil {
		return err
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if env.Endpoint != "" {
			o.BaseEndpoint = aws.String(env.Endpoint)
		}
		o.UsePathStyle = true
	})
	for {
		_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
		var owned *types.BucketAlreadyOwnedByYou
		var exists *types.BucketAlreadyExists
		switch {
		case err == nil, errors.As(err, &owned), errors.As(err, &exists):
			_, err = client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket})
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("create bucket %s: %w", bucket, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
