package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
)

// Taskset is a taskset as the caller sees it (spec: Resources › Taskset).
type Taskset struct {
	ID                   uuid.UUID      `json:"id"`
	Name                 string         `json:"name"`
	Public               bool           `json:"public"`
	CreatedAt            time.Time      `json:"created_at"`
	UpdatedAt            time.Time      `json:"updated_at"`
	CanEdit              bool           `json:"can_edit" doc:"The caller's team owns the taskset or it was shared with write access"`
	CanManage            bool           `json:"can_manage" doc:"The caller's team owns the taskset: it may share, publish and delete it"`
	Columns              map[string]any `json:"columns"`
	Description          string         `json:"description"`
	HiddenProgressStages []string       `json:"hidden_progress_stages" nullable:"false"`
	IsOwner              bool           `json:"is_owner"`
	IsStarred            bool           `json:"is_starred"`
	StarCount            int64          `json:"star_count" minimum:"0"`
	TaskCount            int64          `json:"task_count" minimum:"0"`
}

func tasksetFromRow(r models.TasksetRow) Taskset {
	cols := r.Columns
	if cols == nil {
		cols = map[string]any{}
	}
	stages := r.HiddenProgressStages
	if stages == nil {
		stages = []string{}
	}
	return Taskset{
		ID: r.ID, Name: r.Name, Public: r.Public, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		CanEdit: r.CanEdit, CanManage: r.IsOwner, Columns: cols, Description: r.Description,
		HiddenProgressStages: stages, IsOwner: r.IsOwner, IsStarred: r.IsStarred,
		StarCount: r.StarCount, TaskCount: r.TaskCount,
	}
}

// ListTasksetsInput is the query of GET /v2/tasksets.
type ListTasksetsInput struct {
	Limit      int    `query:"limit" minimum:"1" maximum:"500" default:"50" doc:"Page size"`
	Offset     int    `query:"offset" minimum:"0" maximum:"2147483647" default:"0" doc:"Rows to skip"`
	Search     string `query:"search" maxLength:"200" doc:"Case-insensitive substring of the name"`
	PublicOnly bool   `query:"public_only" default:"false" doc:"Only public tasksets, whoever owns them"`
	OwnerOnly  bool   `query:"owner_only" default:"false" doc:"Only tasksets the caller's team owns (ignored when public_only is true)"`
	SortBy     string `query:"sort_by" enum:"starred,date,name,stars,tasks" default:"starred" doc:"starred: the caller's starred first; date: updated_at descending; name: A-Z; stars: star_count descending; tasks: task_count descending"`
}

// ListTasksetsOutput is one page of tasksets.
type ListTasksetsOutput struct {
	Body Page[Taskset]
}

func (s *Server) registerTasksets() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-tasksets", Method: http.MethodGet, Path: "/tasksets", Tags: []string{"Tasksets"},
		Summary:     "List tasksets",
		Description: "Without public_only: the tasksets owned by or shared with the caller's team. With it: every public taskset.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), func(ctx context.Context, in *ListTasksetsInput) (*ListTasksetsOutput, error) {
		rows, total, err := s.store.ListTasksets(ctx, callerFrom(ctx), models.TasksetQuery{
			Search: in.Search, PublicOnly: in.PublicOnly, OwnerOnly: in.OwnerOnly, SortBy: in.SortBy,
			Limit: in.Limit, Offset: in.Offset,
		})
		if err != nil {
			return nil, storeError(err, "taskset")
		}
		items := make([]Taskset, len(rows))
		for i, r := range rows {
			items[i] = tasksetFromRow(r)
		}
		return &ListTasksetsOutput{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
	})
}
