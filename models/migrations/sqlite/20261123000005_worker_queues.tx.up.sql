-- The task queues each worker process polls, with the sandboxes it may run at once: a worker
-- writes its rows at start and every 15 s, and deletes them when it stops; rows not seen for a
-- minute are a crashed worker's, and go after an hour. GET /v2/workers sums them per queue.
CREATE TABLE worker_queues (
    worker           TEXT NOT NULL,
    queue            TEXT NOT NULL,
    hostname         TEXT NOT NULL,
    sandbox_capacity INTEGER NOT NULL,
    gpus             INTEGER NOT NULL,
    gpu_type         TEXT NOT NULL DEFAULT '',
    started_at       TEXT NOT NULL,
    last_seen_at     TEXT NOT NULL,
    PRIMARY KEY (worker, queue)
);
--bun:split
CREATE INDEX worker_queues_seen_idx ON worker_queues (last_seen_at);
