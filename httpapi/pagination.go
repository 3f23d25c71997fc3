package httpapi

// Page is the list wrapper of the spec: `{items, total, limit, offset}`. Each route declares its
// own limit and offset query fields, because the bounds and defaults differ per route.
type Page[T any] struct {
	Items  []T `json:"items" nullable:"false"`
	Total  int `json:"total" doc:"Rows matching the query, over all pages" minimum:"0"`
	Limit  int `json:"limit" doc:"Page size used" minimum:"0"`
	Offset int `json:"offset" doc:"Rows skipped before this page" minimum:"0"`
}

// NewPage wraps one page of rows; a nil slice becomes [] so that clients never see null.
func NewPage[T any](items []T, total, limit, offset int) Page[T] {
	if items == nil {
		items = []T{}
	}
	return Page[T]{Items: items, Total: total, Limit: limit, Offset: offset}
}
