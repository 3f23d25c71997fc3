package models

import (
	"testing"

	"github.com/google/uuid"
)

// TestContentHashOfVersionsBeforeKeywords: a version stored before keywords and metadata existed
// keeps its hash (computed here by the code of that time), so that uploading the same task again
// still changes nothing; empty keywords and metadata hash as none, and either one set makes
// another hash.
func TestContentHashOfVersionsBeforeKeywords(t *testing.T) {
	r := uuid.MustParse("00000000-0000-0000-0000-000000000001")
	tc := TaskContent{Name: "hello", Description: "d", Env: "todo", Scenario: "add-todos", Args: map[string]any{"items": []any{"milk"}},
		Prompt: "p", Validation: []ValidationCall{}}
	const before = "91988787c1b68602e2bd038be995d2dc92c6958d8aa2d844c8efd921a84f55ee"
	if got := tc.Hash(&r, nil); got != before {
		t.Errorf("hash of a content without keywords or metadata = %s, want %s as before they existed", got, before)
	}
	empty := tc
	empty.Keywords, empty.Metadata = []string{}, map[string]any{}
	if got := empty.Hash(&r, nil); got != before {
		t.Errorf("hash with empty keywords and metadata = %s, want %s, as with none", got, before)
	}
	withKeywords, withMetadata := tc, tc
	withKeywords.Keywords = []string{"files"}
	withMetadata.Metadata = map[string]any{"difficulty": "easy"}
	if withKeywords.Hash(&r, nil) == before || withMetadata.Hash(&r, nil) == before || withKeywords.Hash(&r, nil) == withMetadata.Hash(&r, nil) {
		t.Errorf("keywords or metadata left the hash unchanged")
	}
}
