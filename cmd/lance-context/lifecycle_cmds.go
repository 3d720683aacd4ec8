package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
)

func newCleanupCmd() *cobra.Command {
	var f clientFlags
	var olderThan, grace int64
	var unverified bool
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "cleanup NAME",
		Short: "Remove a store's old base-table versions and the files only they reference",
		Long: "Remove old versions of a store's base table, as Lance's cleanup_old_versions does: the latest version, " +
			"tagged versions, leased and pinned versions and versions younger than --older-than stay; every data, " +
			"deletion and index file no kept version references goes." + clientGroupNote,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		var req api.CleanupRequest
		if cmd.Flags().Changed("older-than") {
			req.OlderThanSeconds = &olderThan
		}
		if cmd.Flags().Changed("read-grace") {
			req.ReadGraceSeconds = &grace
		}
		req.DeleteUnverified = unverified
		res, err := c.Cleanup(cmd.Context(), args[0], &req)
		if err != nil {
			return nil, nil, err
		}
		return res, line("cleaned %s: %d versions, %d files, %d bytes removed; %d versions kept (latest %d)",
			args[0], res.VersionsRemoved, res.FilesRemoved, res.BytesRemoved, res.VersionsKept, res.LatestVersion), nil
	})
	cmd.Flags().Int64Var(&olderThan, "older-than", 0, "keep versions committed less than this many seconds ago (default: the worker's LC_CLEANUP_OLDER_THAN_SECS)")
	cmd.Flags().Int64Var(&grace, "read-grace", 0, "keep versions superseded less than this many seconds ago (default: the worker's LC_CLEANUP_READ_GRACE_SECS)")
	cmd.Flags().BoolVar(&unverified, "delete-unverified", false, "also remove files no version references however young (only when nothing else writes the store)")
	return cmd
}

func newTagCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tag",
		Short: "Create, list and delete tags: named versions of a store's base table that cleanup keeps",
		Long: "Tags name a version of a store's base table in Lance's own tag format, so LanceDB and pylance " +
			"check it out by name; cleanup never removes a tagged version.",
	}
	var fc, fl, fd clientFlags
	cmd.AddCommand(clientVerb(&fc, &cobra.Command{
		Use:   "create NAME TAG [VERSION]",
		Short: "Tag a version (default: the latest)",
		Args:  cobra.RangeArgs(2, 3),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		var v uint64
		if len(args) == 3 {
			n, err := strconv.ParseUint(args[2], 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("version %q: want a positive integer", args[2])
			}
			v = n
		}
		t, err := c.CreateTag(cmd.Context(), args[0], args[1], v)
		if err != nil {
			return nil, nil, err
		}
		return t, line("tagged version %d of %s as %s", t.Version, args[0], t.Name), nil
	}))
	cmd.AddCommand(clientVerb(&fl, &cobra.Command{
		Use:   "list NAME",
		Short: "List a store's tags",
		Args:  cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		tags, err := c.Tags(cmd.Context(), args[0])
		if err != nil {
			return nil, nil, err
		}
		var b strings.Builder
		for _, t := range tags {
			fmt.Fprintf(&b, "%s\t%d\n", t.Name, t.Version)
		}
		return api.TagsResponse{Tags: tags}, line("%s", strings.TrimSuffix(b.String(), "\n")), nil
	}))
	cmd.AddCommand(clientVerb(&fd, &cobra.Command{
		Use:   "delete NAME TAG",
		Short: "Delete a tag (its version becomes subject to cleanup)",
		Args:  cobra.ExactArgs(2),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		if err := c.DeleteTag(cmd.Context(), args[0], args[1]); err != nil {
			return nil, nil, err
		}
		return map[string]string{"deleted": args[1]}, line("deleted tag %s of %s", args[1], args[0]), nil
	}))
	return cmd
}

func newRetentionCmd() *cobra.Command {
	var f clientFlags
	var maxAge time.Duration
	var keep int
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "retention NAME",
		Short: "Show or set a store's row retention (rows past it are deleted at the next cleanup)",
		Long: "Without flags, show the store's row retention. With --max-age or --keep-policy-versions, set it: rows " +
			"older than the age (by created_at) or whose policy_version is not among the newest N (natural order) are " +
			"deleted at the next cleanup, and the next compaction reclaims their bytes. 0 removes a bound." + clientGroupNote,
		Args: cobra.ExactArgs(1),
	}, func(cmd *cobra.Command, c *client.Client, args []string) (any, textFunc, error) {
		var r *api.RetentionConfig
		var err error
		if cmd.Flags().Changed("max-age") || cmd.Flags().Changed("keep-policy-versions") {
			cur, gerr := c.Retention(cmd.Context(), args[0])
			if gerr != nil {
				return nil, nil, gerr
			}
			if cmd.Flags().Changed("max-age") {
				cur.MaxAgeSeconds = int64(maxAge / time.Second)
			}
			if cmd.Flags().Changed("keep-policy-versions") {
				cur.KeepPolicyVersions = keep
			}
			r, err = c.SetRetention(cmd.Context(), args[0], *cur)
		} else {
			r, err = c.Retention(cmd.Context(), args[0])
		}
		if err != nil {
			return nil, nil, err
		}
		return r, line("%s: rows kept for %s, the newest %d policy versions (0: no bound)", args[0], time.Duration(r.MaxAgeSeconds)*time.Second, r.KeepPolicyVersions), nil
	})
	cmd.Flags().DurationVar(&maxAge, "max-age", 0, "delete rows older than this (e.g. 720h); 0 removes the bound")
	cmd.Flags().IntVar(&keep, "keep-policy-versions", 0, "keep only the newest N policy versions; 0 removes the bound")
	return cmd
}
