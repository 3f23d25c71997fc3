package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/models"
)

// team is the --team flag's team, which must exist.
func (a *adminRun) team(ctx context.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(a.teamID)
	if err != nil {
		return uuid.Nil, fmt.Errorf("--team must be a team id (uuid): %w", err)
	}
	if _, err := a.store.GetTeam(ctx, id); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

func (a *adminRun) needMembership() error {
	if a.membership <= 0 {
		return errors.New("--membership is required (see `proctor admin member list`)")
	}
	return nil
}

func (a *adminRun) teamCreate(ctx context.Context) error {
	t, err := a.store.CreateTeam(ctx, a.name)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "team\t%s\nname\t%s\n", t.ID, t.Name)
	return nil
}

func (a *adminRun) teamList(ctx context.Context) error {
	teams, err := a.store.ListTeams(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "ID\tNAME\tCREATED")
	for _, t := range teams {
		fmt.Fprintf(a.tw, "%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Format(time.RFC3339))
	}
	return nil
}

func (a *adminRun) memberAdd(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	u, m, err := a.store.AddMember(ctx, tid, a.name, a.email, a.role)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "membership\t%d\nuser\t%s\nemail\t%s\nrole\t%s\n", m.ID, u.ID, u.Email, m.Role)
	return nil
}

func (a *adminRun) memberList(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	ms, users, err := a.store.ListMembers(ctx, tid)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "MEMBERSHIP\tUSER\tEMAIL\tNAME\tROLE")
	for i, m := range ms {
		fmt.Fprintf(a.tw, "%d\t%s\t%s\t%s\t%s\n", m.ID, users[i].ID, users[i].Email, users[i].Name, m.Role)
	}
	return nil
}

func (a *adminRun) memberRemove(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	if err := a.needMembership(); err != nil {
		return err
	}
	// The member's own data files go with them, bytes included: open the bucket they are in
	// (--blob-url; the dev data dir's without --database-url). With none, a member who has such
	// files is refused rather than leaving their bytes behind.
	var objects models.ObjectDeleter
	if a.cfg.BlobURL != "" {
		b, err := blob.Open(ctx, a.cfg.BlobURL, blob.Options{})
		if err != nil {
			return fmt.Errorf("open object storage: %w", err)
		}
		defer b.Close()
		objects = b
	}
	if err := a.store.RemoveMember(ctx, tid, a.membership, objects); err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "removed membership", a.membership)
	return nil
}

func (a *adminRun) keyCreate(ctx context.Context) error {
	if err := a.needMembership(); err != nil {
		return err
	}
	k, token, err := a.store.CreateAPIKey(ctx, a.membership, a.name)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "id\t%s\nprefix\t%s\nkey\t%s\n", k.ID, k.Prefix, token)
	fmt.Fprintln(a.tw, "\nThe key is shown once; store it now.")
	return nil
}

func (a *adminRun) keyList(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	keys, err := a.store.ListAPIKeys(ctx, tid)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "ID\tPREFIX\tNAME\tMEMBERSHIP\tCREATED\tLAST USED\tREVOKED")
	for _, k := range keys {
		fmt.Fprintf(a.tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, k.MembershipID,
			k.CreatedAt.Format(time.RFC3339), fmtTime(k.LastUsedAt), fmtTime(k.RevokedAt))
	}
	return nil
}

func (a *adminRun) keyRevoke(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	id, err := uuid.Parse(a.keyID)
	if err != nil {
		return fmt.Errorf("--id must be a key id (uuid): %w", err)
	}
	if err := a.store.RevokeAPIKey(ctx, tid, id); err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "revoked", id)
	return nil
}

func (a *adminRun) sessionCreate(ctx context.Context) error {
	if err := a.needMembership(); err != nil {
		return err
	}
	sess, token, err := a.store.CreateSession(ctx, a.membership, nil, a.ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "session\t%s\nexpires\t%s\ncookie\t%s=%s\n", sess.ID, sess.ExpiresAt.Format(time.RFC3339), "proctor_session", token)
	return nil
}

func (a *adminRun) sessionRevoke(ctx context.Context) error {
	var sel models.SessionSelector
	switch {
	case a.keyID != "":
		id, err := uuid.Parse(a.keyID)
		if err != nil {
			return fmt.Errorf("--id must be a session id (uuid): %w", err)
		}
		sel.ID = id
	case a.membership > 0:
		sel.MembershipID = a.membership
	case a.teamID != "":
		tid, err := a.team(ctx)
		if err != nil {
			return err
		}
		sel.TeamID = tid
	default:
		return errors.New("give --id, --membership or --team")
	}
	n, err := a.store.RevokeSessions(ctx, sel)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "revoked\t%d sessions\n", n)
	return nil
}

func (a *adminRun) projectCreate(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	p, err := a.store.CreateProject(ctx, tid, a.name, a.description)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "project\t%s\nname\t%s\n", p.ID, p.Name)
	return nil
}

func (a *adminRun) projectList(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	ps, err := a.store.ListProjects(ctx, tid)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "ID\tNAME\tDESCRIPTION")
	for _, p := range ps {
		fmt.Fprintf(a.tw, "%s\t%s\t%s\n", p.ID, p.Name, p.Description)
	}
	return nil
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}
