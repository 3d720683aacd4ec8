package index

import (
	"context"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
)

// Prepared is the index update of several columns built against a version
// and not committed: the caller puts Add and Remove into its own commit
// (table.Change.IndexAdd, IndexRemove), so that the data an index covers
// and the index land in one version. Discard removes the built files when
// that commit fails or goes without them.
type Prepared struct {
	Add     []*pb.IndexMetadata
	Remove  [][]byte
	Results []*Result
}

// PrepareColumns builds every column's index update against ds (a version
// not yet committed, such as table.Dataset.Apply's, or the latest), as
// UpdateColumns does, without committing it. Nothing to do: an empty
// Prepared.
func PrepareColumns(ctx context.Context, ds *table.Dataset, columns []string, opts BuildOptions) (*Prepared, error) {
	out := prepareEach(ctx, ds, columns, opts)
	pr := &Prepared{}
	var firstErr error
	for _, b := range out {
		if b.err != nil && firstErr == nil {
			firstErr = b.err
		}
		if b.p != nil {
			pr.Add = append(pr.Add, b.p.add)
			pr.Remove = append(pr.Remove, b.p.remove...)
		}
		pr.Results = append(pr.Results, b.res)
	}
	if firstErr != nil {
		pr.Discard(context.WithoutCancel(ctx), ds)
		return nil, firstErr
	}
	return pr, nil
}

// Discard removes the files of the built indexes (not committed).
func (p *Prepared) Discard(ctx context.Context, ds *table.Dataset) {
	for _, m := range p.Add {
		Remove(ctx, ds.Store(), uuidString(m))
	}
}
