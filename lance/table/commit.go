package table

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/objstore"
)

// Writer identity recorded in every manifest we write. Lance trusts
// physical_rows only when a writer version is present.
const (
	writerLibrary = "lance-context-go"
	writerVersion = "0.1.0"
)

// maxCommitAttempts bounds the rebase-and-retry loop. Each failed attempt
// means another writer made progress, so the bound is only a guard.
const maxCommitAttempts = 100

// Kind is the Lance transaction operation a commit records.
type Kind int

const (
	KindAppend Kind = iota
	KindDelete
	KindRewrite
	KindMerge // schema change (additive evolution) over the same fragments
	KindUpdateConfig
	// KindUpdate adds, replaces and removes fragments at once (merge-insert:
	// new rows plus deletions of the rows they supersede).
	KindUpdate
	// KindCreateIndex adds and replaces index metadata (Change.IndexAdd,
	// Change.IndexRemove); the index files are written before the commit.
	KindCreateIndex
)

// Change is what one commit does to the latest version. A ChangeFunc builds
// it against the latest version each time the commit is attempted.
type Change struct {
	Kind Kind
	// New fragments; their ids are assigned at commit, after every existing id.
	New []*pb.DataFragment
	// Updated replaces the fragment with the same id (e.g. a new deletion file).
	Updated []*pb.DataFragment
	// Removed lists fragment ids to drop. With KindRewrite, New takes the place
	// of the first removed fragment.
	Removed []uint64
	// Schema replaces the table schema when non-nil (additive evolution only).
	Schema *schema.Schema
	// Config keys to set and to delete (Manifest.config).
	ConfigUpsert map[string]string
	ConfigDelete []string
	// SchemaMetadata keys to set.
	SchemaMetadata map[string][]byte
	// Predicate is recorded in delete transactions, for humans.
	Predicate string
	// IndexAdd lists index metadata to add to the index section; IndexRemove
	// the uuids of indexes to drop from it (KindCreateIndex).
	IndexAdd    []*pb.IndexMetadata
	IndexRemove [][]byte
}

// ChangeFunc builds a Change against latest. It must not have side effects
// beyond reading, since it may run once per commit attempt.
type ChangeFunc func(ctx context.Context, latest *Dataset) (*Change, error)

// Commit applies fn to the latest version and commits the result as the next
// version, rebasing and retrying when another writer commits first.
func Commit(ctx context.Context, store objstore.Store, fn ChangeFunc) (*Dataset, error) {
	return DefaultCache().Commit(ctx, store, fn)
}

// Commit is the package's Commit for a table whose Datasets share c.
func (c *Cache) Commit(ctx context.Context, store objstore.Store, fn ChangeFunc) (*Dataset, error) {
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		latest, err := c.Open(ctx, store)
		if err != nil {
			return nil, err
		}
		if extra := latest.manifest.GetWriterFeatureFlags() &^ writableFlags; extra != 0 {
			return nil, fmt.Errorf("%w: writer flags %#x; refusing to write", ErrUnsupportedFeature, extra)
		}
		ch, err := fn(ctx, latest)
		if err != nil {
			return nil, err
		}
		next, err := commitOnce(ctx, latest, ch)
		if errors.Is(err, objstore.ErrExists) {
			if err := sleepBackoff(ctx, attempt); err != nil {
				return nil, err
			}
			continue
		}
		return next, err
	}
	return nil, fmt.Errorf("%w: gave up after %d attempts", ErrConflict, maxCommitAttempts)
}

func sleepBackoff(ctx context.Context, attempt int) error {
	d := time.Duration(min(attempt, 10)) * time.Millisecond
	if d == 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// commitOnce writes version latest+1: the version buildVersion makes of
// latest and ch, its transaction file, then its manifest (put-if-absent)
// and the latest-version hint. It returns an error wrapping
// objstore.ErrExists when another writer took that version.
func commitOnce(ctx context.Context, latest *Dataset, ch *Change) (*Dataset, error) {
	nv, err := buildVersion(latest, ch, time.Now(), uuid.NewString())
	if err != nil {
		return nil, err
	}
	m := nv.manifest
	txnBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(nv.txn)
	if err != nil {
		return nil, fmt.Errorf("lance/table: marshal transaction: %w", err)
	}
	if err := latest.store.Put(ctx, transactionsDir+m.TransactionFile, txnBytes); err != nil {
		return nil, fmt.Errorf("lance/table: write transaction: %w", err)
	}
	body, err := encodeManifestFile(m, nv.indexSection, nv.txn)
	if err != nil {
		return nil, err
	}
	if err := latest.store.PutIfAbsent(ctx, latest.naming.key(m.Version), body); err != nil {
		// The transaction file of a lost attempt is harmless garbage: no
		// manifest names it, and Lance's cleanup removes such files.
		return nil, fmt.Errorf("lance/table: commit version %d: %w", m.Version, err)
	}
	// Best effort: the hint only speeds up finding the latest version.
	_ = writeHint(ctx, latest.store, m.Version)
	return &Dataset{store: latest.store, manifest: m, schema: nv.schema, indexSection: nv.indexSection, naming: latest.naming, files: latest.files, projs: newProjections()}, nil
}

// Apply returns the version a commit of ch on d makes when d is still
// the latest: its fragments with their ids assigned, schema, config and
// index section, not written. Reads through it see the data files ch
// adds (written before the commit), so that an index can be built over
// them and committed with them (Change.IndexAdd: data and index in one
// version); a commit that lands on another version assigns other ids.
func (d *Dataset) Apply(ch *Change) (*Dataset, error) {
	nv, err := buildVersion(d, ch, time.Now(), uuid.NewString())
	if err != nil {
		return nil, err
	}
	return &Dataset{store: d.store, manifest: nv.manifest, schema: nv.schema, indexSection: nv.indexSection, naming: d.naming, files: d.files, plainDicts: d.plainDicts, projs: newProjections()}, nil
}

// nextVersion is a version built from the one before it and a change, not
// yet written: its manifest (naming its transaction file), index section,
// transaction and schema.
type nextVersion struct {
	manifest     *pb.Manifest
	indexSection []byte
	txn          *pb.Transaction
	schema       *schema.Schema
}

// buildVersion builds the version after latest that ch makes: fragment
// ids for the new fragments (after the largest ever used), updated and
// removed fragments (ErrConflict when one is gone), the schema, its
// metadata and the table config, the manifest stamped at now, the index
// section (a rewrite drops removed fragments from index bitmaps; index
// changes applied) and the transaction, whose uuid is txnID. It reads and
// writes nothing, and changes neither latest nor ch.
func buildVersion(latest *Dataset, ch *Change, now time.Time, txnID string) (*nextVersion, error) {
	m := proto.Clone(latest.manifest).(*pb.Manifest)
	readVersion := m.GetVersion()
	m.Version = readVersion + 1

	var maxID int64 = -1
	if m.MaxFragmentId != nil {
		maxID = int64(m.GetMaxFragmentId())
	}
	for _, f := range m.Fragments {
		maxID = max(maxID, int64(f.GetId()))
	}
	newFrags := make([]*pb.DataFragment, len(ch.New))
	for i, f := range ch.New {
		c := proto.Clone(f).(*pb.DataFragment)
		maxID++
		c.Id = uint64(maxID)
		newFrags[i] = c
	}
	if maxID >= 0 {
		id := uint32(maxID)
		m.MaxFragmentId = &id
	}

	byID := make(map[uint64]int, len(m.Fragments))
	for i, f := range m.Fragments {
		byID[f.GetId()] = i
	}
	for _, u := range ch.Updated {
		i, ok := byID[u.GetId()]
		if !ok {
			return nil, fmt.Errorf("%w: fragment %d no longer exists", ErrConflict, u.GetId())
		}
		m.Fragments[i] = proto.Clone(u).(*pb.DataFragment)
	}
	removed := make(map[uint64]bool, len(ch.Removed))
	for _, id := range ch.Removed {
		if _, ok := byID[id]; !ok {
			return nil, fmt.Errorf("%w: fragment %d no longer exists", ErrConflict, id)
		}
		removed[id] = true
	}
	frags := make([]*pb.DataFragment, 0, len(m.Fragments)+len(newFrags))
	placed := false
	for _, f := range m.Fragments {
		if removed[f.GetId()] {
			if ch.Kind == KindRewrite && !placed {
				frags = append(frags, newFrags...)
				placed = true
			}
			continue
		}
		frags = append(frags, f)
	}
	if !placed {
		frags = append(frags, newFrags...)
	}
	m.Fragments = frags

	if ch.Schema != nil {
		m.Fields = ch.Schema.Proto()
	}
	if len(ch.SchemaMetadata) > 0 {
		if m.SchemaMetadata == nil {
			m.SchemaMetadata = map[string][]byte{}
		}
		maps.Copy(m.SchemaMetadata, ch.SchemaMetadata)
	}
	if len(ch.ConfigUpsert) > 0 || len(ch.ConfigDelete) > 0 {
		if m.Config == nil {
			m.Config = map[string]string{}
		}
		maps.Copy(m.Config, ch.ConfigUpsert)
		for _, k := range ch.ConfigDelete {
			delete(m.Config, k)
		}
	}
	stampManifest(m, now)

	indexSection := latest.indexSection
	if ch.Kind == KindRewrite && indexSection != nil && len(removed) > 0 {
		var err error
		if indexSection, err = dropFromIndexBitmaps(indexSection, removed); err != nil {
			return nil, err
		}
	}
	if len(ch.IndexAdd) > 0 || len(ch.IndexRemove) > 0 {
		var err error
		if indexSection, err = applyIndexChange(indexSection, ch, m.Fragments); err != nil {
			return nil, err
		}
	}

	txn := buildTransaction(readVersion, ch, newFrags, latest, txnID)
	m.TransactionFile = fmt.Sprintf("%d-%s.txn", readVersion, txn.GetUuid())
	s := latest.schema
	if ch.Schema != nil {
		s = ch.Schema
	}
	if len(ch.SchemaMetadata) > 0 {
		s = &schema.Schema{Fields: s.Fields, Metadata: m.SchemaMetadata}
	}
	return &nextVersion{manifest: m, indexSection: indexSection, txn: txn, schema: s}, nil
}

// stampManifest sets the fields every version we write carries, and
// recomputes the feature flags from the contents, as Lance does.
func stampManifest(m *pb.Manifest, now time.Time) {
	m.Timestamp = &pb.Timestamp{Seconds: now.Unix(), Nanos: int32(now.Nanosecond())}
	m.WriterVersion = &pb.Manifest_WriterVersion{Library: writerLibrary, Version: writerVersion}
	m.DataFormat = &pb.Manifest_DataStorageFormat{FileFormat: "lance", Version: "2.0"}
	m.Tag = ""
	m.ReaderFeatureFlags, m.WriterFeatureFlags = 0, 0
	if slices.ContainsFunc(m.Fragments, func(f *pb.DataFragment) bool { return f.DeletionFile != nil }) {
		m.ReaderFeatureFlags |= FlagDeletionFiles
		m.WriterFeatureFlags |= FlagDeletionFiles
	}
	if len(m.Config) > 0 {
		m.WriterFeatureFlags |= FlagTableConfig
	}
}

func buildTransaction(readVersion uint64, ch *Change, newFrags []*pb.DataFragment, latest *Dataset, txnID string) *pb.Transaction {
	txn := &pb.Transaction{ReadVersion: readVersion, Uuid: txnID}
	switch ch.Kind {
	case KindAppend:
		txn.Operation = &pb.Transaction_Append_{Append: &pb.Transaction_Append{Fragments: newFrags}}
	case KindDelete:
		txn.Operation = &pb.Transaction_Delete_{Delete: &pb.Transaction_Delete{
			UpdatedFragments: ch.Updated, DeletedFragmentIds: ch.Removed, Predicate: ch.Predicate,
		}}
	case KindRewrite:
		var old []*pb.DataFragment
		for _, f := range latest.manifest.GetFragments() {
			if slices.Contains(ch.Removed, f.GetId()) {
				old = append(old, f)
			}
		}
		txn.Operation = &pb.Transaction_Rewrite_{Rewrite: &pb.Transaction_Rewrite{
			Groups: []*pb.Transaction_Rewrite_RewriteGroup{{OldFragments: old, NewFragments: newFrags}},
		}}
	case KindMerge:
		s := latest.schema
		if ch.Schema != nil {
			s = ch.Schema
		}
		txn.Operation = &pb.Transaction_Merge_{Merge: &pb.Transaction_Merge{
			Fragments: latest.manifest.GetFragments(), Schema: s.Proto(), SchemaMetadata: ch.SchemaMetadata,
		}}
	case KindUpdate:
		txn.Operation = &pb.Transaction_Update_{Update: &pb.Transaction_Update{
			RemovedFragmentIds: ch.Removed, UpdatedFragments: ch.Updated, NewFragments: newFrags,
		}}
	case KindCreateIndex:
		var removed []*pb.IndexMetadata
		if idxs, err := latest.Indexes(); err == nil {
			for _, idx := range idxs {
				for _, u := range ch.IndexRemove {
					if string(idx.GetUuid().GetUuid()) == string(u) {
						removed = append(removed, idx)
					}
				}
			}
		}
		txn.Operation = &pb.Transaction_CreateIndex_{CreateIndex: &pb.Transaction_CreateIndex{
			NewIndices: ch.IndexAdd, RemovedIndices: removed,
		}}
	case KindUpdateConfig:
		txn.Operation = &pb.Transaction_UpdateConfig_{UpdateConfig: &pb.Transaction_UpdateConfig{
			UpsertValues: ch.ConfigUpsert, DeleteKeys: ch.ConfigDelete,
		}}
	}
	return txn
}

// CreateOptions configures a new table.
type CreateOptions struct {
	Config map[string]string
}

// Create makes version 1 of a new, empty table with the given schema. It
// fails with an error wrapping objstore.ErrExists when a table exists.
func Create(ctx context.Context, store objstore.Store, s *schema.Schema, opts CreateOptions) (*Dataset, error) {
	return DefaultCache().Create(ctx, store, s, opts)
}

// Create is the package's Create for a table whose Datasets share c.
func (c *Cache) Create(ctx context.Context, store objstore.Store, s *schema.Schema, opts CreateOptions) (*Dataset, error) {
	if _, _, err := latestVersion(ctx, store); err == nil {
		return nil, fmt.Errorf("lance/table: create: %w", objstore.ErrExists)
	} else if !errors.Is(err, ErrNoTable) {
		return nil, err
	}
	m := &pb.Manifest{Fields: s.Proto(), SchemaMetadata: s.Metadata, Version: 1, Config: maps.Clone(opts.Config)}
	stampManifest(m, time.Now())
	txn := &pb.Transaction{ReadVersion: 0, Uuid: uuid.NewString(), Operation: &pb.Transaction_Overwrite_{
		Overwrite: &pb.Transaction_Overwrite{Schema: m.Fields, SchemaMetadata: m.SchemaMetadata, ConfigUpsertValues: m.Config},
	}}
	txnName := fmt.Sprintf("0-%s.txn", txn.GetUuid())
	m.TransactionFile = txnName
	tb, err := proto.Marshal(txn)
	if err != nil {
		return nil, fmt.Errorf("lance/table: marshal transaction: %w", err)
	}
	if err := store.Put(ctx, transactionsDir+txnName, tb); err != nil {
		return nil, fmt.Errorf("lance/table: write transaction: %w", err)
	}
	body, err := encodeManifestFile(m, nil, txn)
	if err != nil {
		return nil, err
	}
	if err := store.PutIfAbsent(ctx, namingV2.key(1), body); err != nil {
		return nil, fmt.Errorf("lance/table: create: %w", err)
	}
	_ = writeHint(ctx, store, 1)
	return &Dataset{store: store, manifest: m, schema: s, naming: namingV2, files: c.f, projs: newProjections()}, nil
}

// Append commits fragments (already written with WriteFragment) as new data.
// Extra config keys go into the same version.
func Append(ctx context.Context, store objstore.Store, frags []*pb.DataFragment, config map[string]string) (*Dataset, error) {
	return Commit(ctx, store, func(_ context.Context, latest *Dataset) (*Change, error) {
		for _, f := range frags {
			if err := checkFragmentSchema(latest.schema, f); err != nil {
				return nil, err
			}
		}
		return &Change{Kind: KindAppend, New: frags, ConfigUpsert: config}, nil
	})
}

// checkFragmentSchema refuses fragments that leave a non-nullable column
// without values, or name field ids the table does not have.
func checkFragmentSchema(s *schema.Schema, f *pb.DataFragment) error {
	have := map[int32]bool{}
	for _, df := range f.GetFiles() {
		for _, id := range df.GetFields() {
			have[id] = true
		}
	}
	known := map[int32]bool{}
	var err error
	s.Walk(func(fl *schema.Field) {
		known[fl.ID] = true
		if fl.ParentID < 0 && !fl.Nullable && !have[fl.ID] && err == nil {
			err = fmt.Errorf("lance/table: column %q is not nullable but the new data has no values for it", fl.Name)
		}
	})
	if err != nil {
		return err
	}
	for id := range have {
		if !known[id] && id >= 0 {
			return fmt.Errorf("%w: data file names field id %d, which the table schema lacks", ErrConflict, id)
		}
	}
	return nil
}

// UpdateConfig sets and deletes table config keys in a new version.
func UpdateConfig(ctx context.Context, store objstore.Store, upsert map[string]string, del []string) (*Dataset, error) {
	return Commit(ctx, store, func(context.Context, *Dataset) (*Change, error) {
		return &Change{Kind: KindUpdateConfig, ConfigUpsert: upsert, ConfigDelete: del}, nil
	})
}

// AddColumns evolves the schema additively: each field of add that the table
// lacks becomes a new nullable column that reads as null for existing rows.
// It is a no-op (returning the latest version) when nothing is missing.
func AddColumns(ctx context.Context, store objstore.Store, add *schema.Schema) (*Dataset, error) {
	latest, err := Open(ctx, store)
	if err != nil {
		return nil, err
	}
	if _, changed, err := latest.schema.Evolve(add.Arrow()); err != nil || !changed {
		return latest, err
	}
	return Commit(ctx, store, func(_ context.Context, latest *Dataset) (*Change, error) {
		s, _, err := latest.schema.Evolve(add.Arrow())
		if err != nil {
			return nil, err
		}
		return &Change{Kind: KindMerge, Schema: s}, nil
	})
}
