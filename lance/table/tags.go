package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/lance-context/lance-context/objstore"
)

// tagsDir holds one JSON file per tag, as Lance writes them, so LanceDB and
// pylance list and check out our tags and we theirs.
const tagsDir = "_refs/tags/"

var (
	// ErrTagExists is returned by CreateTag when the name is taken.
	ErrTagExists = errors.New("lance/table: tag already exists")
	// ErrTagNotFound is returned for a tag that does not exist.
	ErrTagNotFound = errors.New("lance/table: tag not found")
	// ErrInvalidTag is returned for a name Lance would refuse.
	ErrInvalidTag = errors.New("lance/table: invalid tag name")
	// ErrVersionNotFound is returned for a version with no manifest.
	ErrVersionNotFound = errors.New("lance/table: version not found")
)

// Tag is a named pin of one version.
type Tag struct {
	Name         string `json:"name"`
	Version      uint64 `json:"version"`
	ManifestSize int64  `json:"manifest_size"`
}

// tagFile is the bytes of _refs/tags/{name}.json in Lance's own spelling
// (serde camelCase; a missing "branch" means the main branch).
type tagFile struct {
	Branch       *string `json:"branch,omitempty"`
	Version      uint64  `json:"version"`
	ManifestSize int64   `json:"manifestSize"`
}

// ValidTagName reports why Lance would refuse name as a tag, or nil.
func ValidTagName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidTag)
	case len(name) > 256:
		return fmt.Errorf("%w: %d characters, at most 256", ErrInvalidTag, len(name))
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, "."):
		return fmt.Errorf("%w: %q starts or ends with a dot", ErrInvalidTag, name)
	case strings.HasSuffix(name, ".lock"):
		return fmt.Errorf("%w: %q ends with .lock", ErrInvalidTag, name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("%w: %q has two dots in a row", ErrInvalidTag, name)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
		if !ok {
			return fmt.Errorf("%w: %q: use only letters, digits, '.', '-' and '_'", ErrInvalidTag, name)
		}
	}
	return nil
}

// CreateTag names version of the table rooted at store. The version must
// exist; the name must be free (tags are not moved: delete, then create).
func CreateTag(ctx context.Context, store objstore.Store, name string, version uint64) (*Tag, error) {
	if err := ValidTagName(name); err != nil {
		return nil, err
	}
	_, n, err := latestVersion(ctx, store)
	if err != nil {
		return nil, err
	}
	info, err := store.Head(ctx, n.key(version))
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: version %d", ErrVersionNotFound, version)
	}
	if err != nil {
		return nil, fmt.Errorf("lance/table: tag %s: %w", name, err)
	}
	b, err := json.Marshal(tagFile{Version: version, ManifestSize: info.Size})
	if err != nil {
		return nil, err
	}
	if err := store.PutIfAbsent(ctx, tagsDir+name+".json", b); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return nil, fmt.Errorf("%w: %s", ErrTagExists, name)
		}
		return nil, fmt.Errorf("lance/table: tag %s: %w", name, err)
	}
	// A cleanup that listed tags before this one existed may be removing
	// the version now: if its manifest is gone, the tag pins nothing.
	if _, err := store.Head(ctx, n.key(version)); errors.Is(err, objstore.ErrNotFound) {
		_ = store.Delete(context.WithoutCancel(ctx), tagsDir+name+".json")
		return nil, fmt.Errorf("%w: version %d was cleaned up while it was tagged", ErrVersionNotFound, version)
	}
	return &Tag{Name: name, Version: version, ManifestSize: info.Size}, nil
}

// GetTag returns one tag.
func GetTag(ctx context.Context, store objstore.Store, name string) (*Tag, error) {
	if err := ValidTagName(name); err != nil {
		return nil, err
	}
	b, err := store.Get(ctx, tagsDir+name+".json")
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrTagNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("lance/table: tag %s: %w", name, err)
	}
	return decodeTag(name, b)
}

func decodeTag(name string, b []byte) (*Tag, error) {
	var f tagFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: tag %s: %v", ErrCorrupt, name, err)
	}
	return &Tag{Name: name, Version: f.Version, ManifestSize: f.ManifestSize}, nil
}

// ListTags returns every tag of the main branch, by name. Tags of other
// branches (Lance's branch field) are listed too: they pin manifests under
// tree/, which cleanup of the main branch does not touch.
func ListTags(ctx context.Context, store objstore.Store) ([]Tag, error) {
	infos, err := store.List(ctx, tagsDir)
	if err != nil {
		return nil, fmt.Errorf("lance/table: list tags: %w", err)
	}
	var out []Tag
	for _, o := range infos {
		name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, tagsDir), ".json")
		if !ok || strings.Contains(name, "/") {
			continue
		}
		b, err := store.Get(ctx, o.Key)
		if errors.Is(err, objstore.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("lance/table: read tag %s: %w", name, err)
		}
		t, err := decodeTag(name, b)
		if err != nil {
			return nil, err
		}
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteTag removes a tag; its version becomes subject to cleanup again.
func DeleteTag(ctx context.Context, store objstore.Store, name string) error {
	if err := ValidTagName(name); err != nil {
		return err
	}
	key := tagsDir + name + ".json"
	if _, err := store.Head(ctx, key); errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrTagNotFound, name)
	} else if err != nil {
		return fmt.Errorf("lance/table: tag %s: %w", name, err)
	}
	return store.Delete(ctx, key)
}

// CheckoutTag returns the version a tag names.
func CheckoutTag(ctx context.Context, store objstore.Store, name string) (*Dataset, error) {
	t, err := GetTag(ctx, store, name)
	if err != nil {
		return nil, err
	}
	return Checkout(ctx, store, t.Version)
}
