-- One alert per alert limit per period: the row is written before the mail is sent and marked
-- sent after, so a restart neither skips nor repeats a mailed alert.
CREATE TABLE limit_alerts (
    limit_id     UUID NOT NULL REFERENCES spending_limits (id) ON DELETE CASCADE,
    period_start TIMESTAMPTZ NOT NULL,
    recipient    TEXT NOT NULL,
    spend_usd    DOUBLE PRECISION NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    sent_at      TIMESTAMPTZ,
    PRIMARY KEY (limit_id, period_start)
);
