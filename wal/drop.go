package wal

import (
	"context"
	"errors"
)

// drop removes generations <= upTo from the manifest, then their files.
// When files may have been left behind (after a claim, or a failed delete),
// it also sweeps generation files <= upTo the manifest does not list.
func (w *Writer) drop(ctx context.Context, upTo uint64) error {
	nm := w.man.clone()
	var keep []Generation
	var gone []string
	for _, g := range nm.Generations {
		if g.Generation <= upTo {
			gone = append(gone, g.Path)
		} else {
			keep = append(keep, g)
		}
	}
	sweep := w.sweep.Swap(false)
	if len(gone) == 0 {
		if sweep {
			w.collect(1, 0, 0, nil, upTo, listedPaths(w.man))
		}
		return nil
	}
	nm.Generations = keep
	nm.Version++
	nm.UpdatedAt = w.opts.Clock.Now().UTC()
	if err := commitManifest(ctx, w.opts.Store, w.opts.Shard, nm); err != nil {
		if sweep {
			w.sweep.Store(true)
		}
		if errors.Is(err, ErrFenced) {
			return w.fence(err)
		}
		return err
	}
	w.man = nm
	w.publish()
	if sweep {
		w.collect(1, 0, nm.Version, gone, upTo, listedPaths(nm))
	} else {
		w.collect(1, 0, nm.Version, gone, 0, nil)
	}
	return nil
}

func listedPaths(m *Manifest) map[string]bool {
	out := make(map[string]bool, len(m.Generations))
	for _, g := range m.Generations {
		out[g.Path] = true
	}
	return out
}
