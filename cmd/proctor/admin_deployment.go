package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/models/credentials"
	ptemporal "github.com/proctorhq/proctor/temporal"
)

func (a *adminRun) keysCreate() error {
	if a.cfg.SecretsKeyFile == "" {
		return errors.New("--secrets-key-file is required: where to write the new keyset")
	}
	k, err := secrets.Create(a.cfg.SecretsKeyFile)
	if err != nil {
		return fmt.Errorf("create %s: %w", a.cfg.SecretsKeyFile, err)
	}
	fmt.Fprintf(a.stdout, "created %s (primary key %d); give it to every server and worker as PROCTOR_SECRETS_KEY_FILE, and keep a copy: without it no stored secret can be read\n", a.cfg.SecretsKeyFile, k.Primary())
	return nil
}

func (a *adminRun) keysRotate(ctx context.Context) error {
	if a.cfg.SecretsKMSURI != "" {
		return errors.New("a Cloud KMS key is rotated in KMS (gcloud kms keys versions create …, or a rotation schedule); then run `proctor admin keys rewrap`")
	}
	if a.cfg.SecretsKeyFile == "" {
		return errors.New("--secrets-key-file (PROCTOR_SECRETS_KEY_FILE) is required: the keyset to rotate")
	}
	id, err := secrets.Rotate(a.cfg.SecretsKeyFile)
	if err != nil {
		return err
	}
	k, err := secrets.Load(a.cfg.SecretsKeyFile)
	if err != nil {
		return err
	}
	n, err := credentials.Of(a.store).RewrapSecrets(ctx, k.Rewrap)
	if err != nil {
		return fmt.Errorf("the key rotated to %d, but re-wrapping stopped (run `keys rotate` again, or re-wrap later: old keys still open old values): %w", id, err)
	}
	fmt.Fprintf(a.stdout, "new primary key %d; re-wrapped %d stored secrets with it\n", id, n)
	return nil
}

func (a *adminRun) keysRewrap(ctx context.Context) error {
	keys, err := openSecrets(a.cfg, false, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	if keys == nil {
		return errors.New("--secrets-key-file or --secrets-kms-uri is required: the key to re-wrap with")
	}
	n, err := credentials.Of(a.store).RewrapSecrets(ctx, keys.Rewrap)
	if err != nil {
		return fmt.Errorf("re-wrapping stopped after %d values (run it again): %w", n, err)
	}
	fmt.Fprintf(a.stdout, "re-wrapped %d stored secrets\n", n)
	return nil
}

func (a *adminRun) temporalSetup(ctx context.Context) error {
	if a.cfg.TemporalAddress == "" || a.cfg.TemporalNamespace == "" {
		return errors.New("--temporal-address and --temporal-namespace are required (or PROCTOR_TEMPORAL_ADDRESS and PROCTOR_TEMPORAL_NAMESPACE)")
	}
	if a.retention < 24*time.Hour {
		return errors.New("--retention must be at least 24h (Temporal's minimum)")
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	created, has, err := ptemporal.EnsureNamespace(sctx, a.cfg.TemporalAddress, a.cfg.TemporalNamespace, a.retention)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(a.stdout, "created namespace %s on %s (history kept %s)\n", a.cfg.TemporalNamespace, a.cfg.TemporalAddress, has)
	} else {
		fmt.Fprintf(a.stdout, "namespace %s exists on %s (history kept %s)\n", a.cfg.TemporalNamespace, a.cfg.TemporalAddress, has)
	}
	return nil
}
