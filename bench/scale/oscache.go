//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lance-context/lance-context/lance/index"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// The OS page cache decides much of what a read of a local store costs:
// a row whose file pages are cached costs a copy, one that is not costs a
// disk read (~0.1-0.5 ms here). What a run leaves cached depends on its
// earlier steps (the load, the compaction, the smaller sizes), and so
// differs between sizes: a 100k store is always wholly cached, a 10M one
// (12 GB) partly, and a different part each run. So the reads are timed
// in a stated cache state (--os-cache), the same for us and for LanceDB
// (whose copy is hard links to the same files, so it shares their cached
// pages):
//   - warm (default): the table's files are read once before the timed
//     reads, as a worker whose store fits in memory has them after a
//     while in use; skipped, and said so, when they do not fit;
//   - cold: the page cache is dropped (root only), as after a reboot;
//   - as-is: whatever the run left.
//
// Each measurement reports its disk reads per call (disk_kib_per_call).
const (
	osCacheWarm = "warm"
	osCacheCold = "cold"
	osCacheAsIs = "as-is"
)

// prepareOSCache puts the table's files under dir in the page cache state
// mode asks for and describes the state the reads then see.
func prepareOSCache(ctx context.Context, dir, mode string) (map[string]any, error) {
	if err := checkOSCache(mode); err != nil {
		return nil, err
	}
	files, total, err := tableFiles(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"mode": mode, "table_bytes": total}
	before := residentBytes(files)
	out["resident_before_pct"] = pctOf(before, total)
	t := time.Now()
	switch mode {
	case osCacheWarm:
		avail, err := memAvailable()
		if err != nil {
			return nil, err
		}
		// What is not yet cached must fit in what the kernel can give
		// without evicting the process's own memory, with room to spare
		// for the reads' caches and LanceDB's process.
		if need := total - before; need > avail*3/4 {
			out["mode"] = osCacheAsIs
			out["skipped"] = fmt.Sprintf("%d uncached bytes do not fit in 3/4 of the %d bytes available", need, avail)
			break
		}
		if err := readAll(files); err != nil {
			return nil, err
		}
	case osCacheCold:
		unix.Sync()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
			return nil, fmt.Errorf("--os-cache cold drops the page cache, which needs root: %w", err)
		}
	}
	out["secs"] = time.Since(t).Seconds()
	out["resident_pct"] = pctOf(residentBytes(files), total)
	return out, nil
}

// checkOSCache reports a --os-cache value this system cannot take.
func checkOSCache(mode string) error {
	switch mode {
	case osCacheWarm, osCacheCold, osCacheAsIs:
		return nil
	}
	return fmt.Errorf("--os-cache %q: want %s, %s or %s", mode, osCacheWarm, osCacheCold, osCacheAsIs)
}

func pctOf(part, total int64) float64 {
	if total == 0 {
		return 100
	}
	return float64(part) * 100 / float64(total)
}

// tableFiles lists the files of the table's latest version under dir:
// its fragments' data files and its indexes' files (not the files of
// older versions a compaction left, which no read touches), and their
// total size.
func tableFiles(ctx context.Context, dir string) ([]string, int64, error) {
	st, err := objstore.NewLocal(dir)
	if err != nil {
		return nil, 0, err
	}
	d, err := table.Open(ctx, st)
	if err != nil {
		return nil, 0, err
	}
	var files []string
	for _, f := range d.Fragments() {
		for _, df := range f.GetFiles() {
			files = append(files, filepath.Join(dir, "data", df.GetPath()))
		}
	}
	idxs, err := d.Indexes()
	if err != nil {
		return nil, 0, err
	}
	for _, m := range idxs {
		idir := filepath.Join(dir, "_indices", index.UUID(m))
		des, err := os.ReadDir(idir)
		if err != nil {
			return nil, 0, err
		}
		for _, de := range des {
			files = append(files, filepath.Join(idir, de.Name()))
		}
	}
	var total int64
	for _, p := range files {
		info, err := os.Stat(p)
		if err != nil {
			return nil, 0, err
		}
		total += info.Size()
	}
	return files, total, nil
}

// residentBytes is how many bytes of files the page cache holds (mincore
// on a read-only mapping; nothing is read). Files that cannot be mapped
// count as not cached.
func residentBytes(files []string) int64 {
	page := int64(os.Getpagesize())
	var n int64
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		info, err := f.Stat()
		if err != nil || info.Size() == 0 {
			f.Close()
			continue
		}
		m, err := unix.Mmap(int(f.Fd()), 0, int(info.Size()), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			continue
		}
		vec := make([]byte, (info.Size()+page-1)/page)
		// x/sys has no wrapper for mincore(2).
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
		if errno == 0 {
			for i, v := range vec {
				if v&1 != 0 {
					n += min(page, info.Size()-int64(i)*page)
				}
			}
		}
		unix.Munmap(m)
	}
	return n
}

// readAll reads every file once, through a small buffer.
func readAll(files []string) error {
	buf := make([]byte, 1<<20)
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		f.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
	}
	return nil
}

// memAvailable is the kernel's estimate of memory available without
// swapping (MemAvailable), in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}
