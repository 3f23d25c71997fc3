package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
)

func (s *Server) registerLimits() {
	tags := []string{"Spending limits"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-limits", Method: http.MethodGet, Path: "/limits", Tags: tags, Summary: "List spending limits",
		Description: "The team's limits, each with its current period's spend (spend_usd): the only read path.",
	}, authKeyOrSession), s.listLimits)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "create-limit", Method: http.MethodPost, Path: "/limits", Tags: tags, Summary: "Create a spending limit",
		Description: "A ceiling in USD per week (from Monday 00:00 UTC) or month (from the 1st, UTC) for one API key or one member. " +
			"Spend is the cost of the scope's inference calls in the period. Once it reaches threshold_percent of amount_usd, a " +
			"block limit refuses the scope's new launches and completions (403, code spending_limit_reached); running attempts finish.",
		DefaultStatus: http.StatusCreated,
	}, authKeyOrSession)), s.createLimit)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "update-limit", Method: http.MethodPatch, Path: "/limits/{limit_id}", Tags: tags, Summary: "Change a spending limit",
		Description: "Its amount, threshold or enabled; scope and interval cannot change (delete and recreate).",
		Errors:      []int{http.StatusNotFound},
	}, authKeyOrSession)), s.updateLimit)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "delete-limit", Method: http.MethodDelete, Path: "/limits/{limit_id}", Tags: tags, Summary: "Delete a spending limit",
		DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound},
	}, authKeyOrSession)), s.deleteLimit)
}

// Limit is a spending limit as answers show it (amounts as strings, as the spec says).
type Limit struct {
	ID               uuid.UUID  `json:"id"`
	APIKeyID         *uuid.UUID `json:"api_key_id"`
	APIKeyName       string     `json:"api_key_name"`
	MembershipID     *int64     `json:"membership_id"`
	MemberName       string     `json:"member_name"`
	ParentLimitID    *uuid.UUID `json:"parent_limit_id"`
	ThresholdPercent string     `json:"threshold_percent"`
	Interval         string     `json:"interval" enum:"week,month"`
	AmountUSD        string     `json:"amount_usd"`
	Action           string     `json:"action" enum:"alert,block"`
	Enabled          bool       `json:"enabled"`
	SpendUSD         string     `json:"spend_usd" doc:"the current period's spend"`
}

func money(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func limitFrom(r billing.LimitRow) Limit {
	return Limit{ID: r.ID, APIKeyID: r.APIKeyID, APIKeyName: r.APIKeyName, MembershipID: r.MembershipID, MemberName: r.MemberName,
		ParentLimitID: r.ParentLimitID, ThresholdPercent: money(r.ThresholdPercent), Interval: r.Interval, AmountUSD: money(r.AmountUSD),
		Action: r.Action, Enabled: r.Enabled, SpendUSD: money(r.SpendUSD)}
}

type listLimitsOutput struct {
	Body struct {
		Limits []Limit `json:"limits" nullable:"false"`
	}
}

// listLimits serves GET /v2/limits.
func (s *Server) listLimits(ctx context.Context, _ *struct{}) (*listLimitsOutput, error) {
	rows, err := s.billing.ListLimits(ctx, callerFrom(ctx))
	if err != nil {
		return nil, err
	}
	out := &listLimitsOutput{}
	out.Body.Limits = make([]Limit, len(rows))
	for i, r := range rows {
		out.Body.Limits[i] = limitFrom(r)
	}
	return out, nil
}

type createLimitInput struct {
	Body struct {
		Interval         string     `json:"interval" enum:"week,month"`
		Action           string     `json:"action" enum:"alert,block"`
		AmountUSD        float64    `json:"amount_usd" minimum:"0" maximum:"1000000000"`
		APIKeyID         *uuid.UUID `json:"api_key_id,omitempty"`
		MembershipID     *int64     `json:"membership_id,omitempty" minimum:"1"`
		Enabled          *bool      `json:"enabled,omitempty" doc:"default true"`
		ParentLimitID    *uuid.UUID `json:"parent_limit_id,omitempty"`
		ThresholdPercent *float64   `json:"threshold_percent,omitempty" minimum:"1" maximum:"100" doc:"default 100"`
	}
}

// Resolve needs exactly one scope.
func (in *createLimitInput) Resolve(huma.Context) []error {
	b := in.Body
	errs := nilIDs(map[string]*uuid.UUID{"body.api_key_id": b.APIKeyID, "body.parent_limit_id": b.ParentLimitID})
	if (b.APIKeyID == nil) == (b.MembershipID == nil) {
		errs = append(errs, &huma.ErrorDetail{Location: "body", Message: "a limit is for one API key (api_key_id) or one member (membership_id): give exactly one"})
	}
	return errs
}

type limitOutput struct{ Body Limit }

// createLimit serves POST /v2/limits.
func (s *Server) createLimit(ctx context.Context, in *createLimitInput) (*limitOutput, error) {
	b := in.Body
	l := &models.SpendingLimit{APIKeyID: b.APIKeyID, MembershipID: b.MembershipID, ParentLimitID: b.ParentLimitID, Interval: b.Interval,
		AmountUSD: b.AmountUSD, Action: b.Action, Enabled: b.Enabled == nil || *b.Enabled, ThresholdPercent: 100}
	if b.ThresholdPercent != nil {
		l.ThresholdPercent = *b.ThresholdPercent
	}
	r, err := s.billing.CreateLimit(ctx, callerFrom(ctx), l)
	if err != nil {
		return nil, storeError(err, "limit")
	}
	return &limitOutput{Body: limitFrom(r)}, nil
}

type updateLimitInput struct {
	LimitID uuid.UUID `path:"limit_id"`
	Body    struct {
		AmountUSD        *float64 `json:"amount_usd,omitempty" minimum:"0" maximum:"1000000000"`
		Enabled          *bool    `json:"enabled,omitempty"`
		ThresholdPercent *float64 `json:"threshold_percent,omitempty" minimum:"1" maximum:"100"`
	}
}

// updateLimit serves PATCH /v2/limits/{limit_id}.
func (s *Server) updateLimit(ctx context.Context, in *updateLimitInput) (*limitOutput, error) {
	r, err := s.billing.UpdateLimit(ctx, callerFrom(ctx), in.LimitID, billing.LimitUpdate{AmountUSD: in.Body.AmountUSD, Enabled: in.Body.Enabled,
		ThresholdPercent: in.Body.ThresholdPercent})
	if err != nil {
		return nil, storeError(err, "limit")
	}
	return &limitOutput{Body: limitFrom(r)}, nil
}

type limitPath struct {
	LimitID uuid.UUID `path:"limit_id"`
}

// deleteLimit serves DELETE /v2/limits/{limit_id}.
func (s *Server) deleteLimit(ctx context.Context, in *limitPath) (*struct{}, error) {
	if err := s.billing.DeleteLimit(ctx, callerFrom(ctx), in.LimitID); err != nil {
		return nil, storeError(err, "limit")
	}
	return nil, nil
}

// canLaunch is the check every launch route makes first: the engine is there, and the
// caller's spending limits allow new work.
func (s *Server) canLaunch(ctx context.Context) error {
	if err := s.requireWorkflows(); err != nil {
		return err
	}
	return s.checkSpend(ctx)
}

// checkSpend refuses new paid work of a caller whose block limit has been reached.
func (s *Server) checkSpend(ctx context.Context) error {
	r, err := s.billing.ReachedBlock(ctx, callerFrom(ctx))
	if err != nil || r == nil {
		return err
	}
	scope := "your API key"
	if r.MembershipID != nil {
		scope = "you"
	}
	e := newAPIError(http.StatusForbidden, fmt.Sprintf("the spending limit %s on %s is reached: $%s spent this %s of $%s at %s%%; a team owner can raise or disable it (PATCH /v2/limits/%s)",
		r.ID, scope, money(r.SpendUSD), r.Interval, money(r.AmountUSD), money(r.ThresholdPercent), r.ID))
	e.ErrorBody.Error.Code = "spending_limit_reached"
	return e
}
