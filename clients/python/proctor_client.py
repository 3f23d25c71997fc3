"""A client of Proctor's /v2 API for a trainer: launch groups of attempts, take each group once
all its attempts have ended (as the job's stream of finished attempts says), and export a job's
attempts. Python's standard library only.

    from proctor_client import Client
    client = Client()  # $PROCTOR_API_URL and $PROCTOR_API_KEY, else the local dev instance
    job = client.run_list(taskset_id=client.taskset_id("demo"),
                          model_ids=[client.model_id("oracle")], group_size=4)
    for group in client.groups(job):
        print(group.id, [a.reward for a in group.attempts])
    client.export(job, "job.jsonl")

The API is the contract in the repository's openapi.yaml; errors come back as ProctorError with
the API's status, code and message.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass, field

__all__ = ["Client", "ProctorError", "Attempt", "Group"]

# Statuses in which an attempt, and a job, have ended.
ENDED = frozenset({"completed", "error", "cancelled"})
JOB_ENDED = frozenset({"completed", "cancelled"})


def _dev_credentials():
    """The credentials a proctor dev instance keeps: the data dir's, else the user's last."""
    config = os.environ.get("PROCTOR_CONFIG_DIR") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "proctor")
    for path in (os.path.join(os.environ.get("PROCTOR_DATA_DIR") or ".proctor", "credentials.json"),
                 os.path.join(config, "credentials.json")):
        try:
            with open(path) as f:
                creds = json.load(f)
        except (OSError, ValueError):
            continue
        if creds.get("api_key"):
            return creds
    return {}


class ProctorError(Exception):
    """An answer of the API that is not a success: its HTTP status, code and message, and for a
    422 the fields at fault (details)."""

    def __init__(self, status, code, message, details=()):
        text = f"{status} {code}: {message}"
        if details:
            text += " (" + "; ".join(details) + ")"
        super().__init__(text)
        self.status, self.code, self.message, self.details = status, code, message, list(details)

    @classmethod
    def of(cls, status, body):
        """The error an answer's body carries: the API's envelope, {"error": {"code", "message"}},
        or a 422's problem details (title, detail and errors)."""
        try:
            doc = json.loads(body)
        except ValueError:
            return cls(status, str(status), body.decode(errors="replace"))
        if isinstance(doc.get("error"), dict):
            return cls(status, doc["error"].get("code") or str(status), doc["error"].get("message") or "")
        details = [f"{d.get('location', '')}: {d.get('message', '')}" for d in doc.get("errors") or []]
        return cls(status, doc.get("title") or str(status), doc.get("detail") or "", details)


@dataclass(frozen=True)
class Attempt:
    """One attempt (a trace) as the job lists it."""

    trace_id: str
    group_id: str
    task_version_id: str
    status: str
    reward: float | None
    stop_reason: str
    error: str


@dataclass(frozen=True)
class Group:
    """The attempts of one group (one task version × model, group_size of them), all ended; seq
    is the number of the last of them in the job's stream of finished attempts."""

    id: str
    attempts: list = field(default_factory=list)
    seq: int = 0

    @property
    def rewards(self):
        return [a.reward for a in self.attempts]


def _attempt(event):
    """An Attempt of an event of the stream of finished attempts."""
    return Attempt(trace_id=event["trace_id"], group_id=event.get("group_id") or "",
                   task_version_id=event.get("task_version_id") or "", status=event["status"],
                   reward=event.get("reward"), stop_reason=event.get("stop_reason") or "",
                   error=event.get("error") or "")


class Client:
    """Talks to one Proctor server with one API key, found as the proctor CLI finds them: the
    arguments, else $PROCTOR_API_URL and $PROCTOR_API_KEY, else the credentials of the dev instance
    in $PROCTOR_DATA_DIR (default .proctor), else of the last dev instance this user started
    ($PROCTOR_CONFIG_DIR, default ~/.config/proctor)."""

    def __init__(self, url=None, api_key=None, timeout=60.0):
        url = url or os.environ.get("PROCTOR_API_URL")
        api_key = api_key or os.environ.get("PROCTOR_API_KEY")
        if not url or not api_key:
            creds = _dev_credentials()
            url, api_key = url or creds.get("api_url"), api_key or creds.get("api_key")
        if not api_key:
            raise ValueError("no API key: pass api_key, set PROCTOR_API_KEY, or start `proctor dev`")
        self.url = (url or "http://127.0.0.1:8080").rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def _open(self, method, path, body=None, query=None):
        url = self.url + path
        if query:
            # A list is one comma-separated value, as the API reads its list parameters.
            query = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple, set)) else v for k, v in query.items()}
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.api_key)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            raise ProctorError.of(e.code, e.read()) from None

    def _call(self, method, path, body=None, query=None):
        with self._open(method, path, body, query) as res:
            return json.loads(res.read() or b"null")

    def _items(self, path, query=None):
        """Every item of a paged listing (its items, limit, offset and total), page by page."""
        offset = 0
        while True:
            page = self._call("GET", path, query={**(query or {}), "limit": 500, "offset": offset})
            yield from page["items"]
            offset += len(page["items"])
            if not page["items"] or offset >= page["total"]:
                return

    def taskset_id(self, name):
        """The id of the taskset called name."""
        for ts in self._items("/v2/tasksets", {"search": name}):
            if ts["name"] == name:
                return ts["id"]
        raise ProctorError(404, "not_found", f"no taskset {name!r}")

    def model_id(self, name):
        """The id of the catalog model called name."""
        return self._call("GET", "/v2/models/resolve", query={"model": name})["id"]

    def run_list(self, model_ids, taskset_id=None, task_version_ids=None, group_size=1,
                 max_concurrent=None, name=None, max_steps=None, agent=None, max_cost_usd=None):
        """Launches group_size attempts of every task version (of taskset_id, or those listed) ×
        model as one job, and returns its id. Pairs the server rejects are warned of (the others
        run; the answer is kept as last_launch); when it rejects them all, ProctorError. With
        max_cost_usd, the job pauses once it has spent that much (see resume)."""
        body = {"model_ids": list(model_ids), "group_size": group_size}
        for key, value in (("taskset_id", taskset_id), ("task_version_ids", task_version_ids),
                           ("max_concurrent", max_concurrent), ("name", name),
                           ("max_steps", max_steps), ("agent", agent), ("max_cost_usd", max_cost_usd)):
            if value is not None:
                body[key] = value
        out = self._call("POST", "/v2/rollouts/run_list", body)
        self.last_launch = out
        if out.get("rejected"):
            bad = [r for r in out.get("results") or [] if r.get("error")]
            if not out.get("accepted"):
                raise ProctorError(422, "rejected", f"every pair was rejected: {bad[:3]}")
            # The rest runs: the job is the caller's to follow (or cancel).
            warnings.warn(f"{out['rejected']} of {out.get('total')} pairs rejected (the rest runs): {bad[:3]}", stacklevel=2)
        return out["job_id"]

    def job(self, job_id):
        """The job, as GET /v2/jobs/{job_id} answers it."""
        return self._call("GET", f"/v2/jobs/{job_id}")

    def resume(self, job_id, max_cost_usd=None, lift_ceiling=False):
        """Goes on with a job paused at its max_cost_usd: with a higher ceiling, or none
        (lift_ceiling). Returns {job_id, status, max_cost_usd, spent_usd}; ProctorError 409 for a
        job that is not paused, 422 for a ceiling not above what it has spent."""
        body = {"lift_ceiling": True} if lift_ceiling else {"max_cost_usd": max_cost_usd}
        return self._call("POST", f"/v2/jobs/{job_id}/resume", body)

    def attempts(self, job_id):
        """Every attempt of the job, as it stands now."""
        return [Attempt(trace_id=t["id"], group_id=t.get("group_id") or "",
                        task_version_id=t.get("task_version_id") or "", status=t["status"],
                        reward=t.get("reward"), stop_reason=t.get("stop_reason") or "",
                        error=t.get("error") or "")
                for t in self._items(f"/v2/jobs/{job_id}/traces")]

    def finished(self, job_id, after=0, tries=5):
        """Yields each attempt of the job as it ends, as the job's stream of finished attempts
        (GET /v2/jobs/{job_id}/finished, server-sent events) gives it: a dict with seq (its number
        in the job's sequence, from 1), trace_id, group_id, group_size, group_complete, status,
        stop_reason, error and reward. It ends when the job has ended and every attempt was
        given. after resumes after the attempt numbered so; a stream cut off is opened again from
        the last number read, up to tries times in a row, so each attempt comes once."""
        failures = 0
        while True:
            try:
                with self._open("GET", f"/v2/jobs/{job_id}/finished", query={"after": after}) as res:
                    event, data = None, []
                    for raw in res:
                        line = raw.decode().rstrip("\r\n")
                        if line.startswith(":"):
                            continue  # the server saying the stream is alive
                        if line:
                            key, _, value = line.partition(":")
                            if key == "event":
                                event = value.strip()
                            elif key == "data":
                                data.append(value[1:] if value.startswith(" ") else value)
                            continue
                        if event == "end":
                            return
                        if event == "attempt":
                            attempt = json.loads("\n".join(data))
                            after, failures = attempt["seq"], 0
                            yield attempt
                        event, data = None, []
                raise ConnectionError("the stream of finished attempts ended before its end event")
            except (ConnectionError, http.client.HTTPException, TimeoutError, urllib.error.URLError, ProctorError) as e:
                failures += 1
                if failures >= tries or isinstance(e, ProctorError) and e.status < 500:
                    raise
                time.sleep(min(2 ** failures, 10))

    def groups(self, job_id, after=0):
        """Yields each group of the job once all its attempts have ended (whatever their status),
        in the order they complete, from the job's stream of finished attempts, until the job has
        ended. Each Group carries seq, the number of its last attempt: pass the last one taken as
        after to resume, and no group comes twice. An attempt launched without a group is a group
        of one."""
        members = {}
        for a in self.finished(job_id, after=after):
            gid = a["group_id"] or a["trace_id"]
            members.setdefault(gid, []).append(_attempt(a))
            if a["group_complete"]:
                got = members.pop(gid)
                if len(got) < a["group_size"]:
                    # A resumed stream began after some of the group's attempts: read them all.
                    got = [m for m in self.attempts(job_id) if (m.group_id or m.trace_id) == gid]
                yield Group(id=gid, attempts=got, seq=a["seq"])

    def export(self, job_id, path, tries=5, **filters):
        """Writes the job's attempts to path as JSON Lines (GET /v2/jobs/{job_id}/export, filters
        as its query), and returns how many lines were written. A stream cut off is asked for
        again from the last whole line's cursor, up to tries times, so each attempt is written once."""
        n, cursor = 0, None
        with open(path, "wb") as f:
            for attempt in range(tries):
                query = dict(filters)
                if cursor is not None:
                    query["cursor"] = cursor
                try:
                    with self._open("GET", f"/v2/jobs/{job_id}/export", query=query or None) as res:
                        for line in res:
                            if not line.endswith(b"\n"):
                                raise ConnectionError("the export was cut off mid-line")
                            f.write(line)
                            n += 1
                            cursor = json.loads(line).get("cursor", cursor)
                    return n
                except (ConnectionError, http.client.HTTPException, TimeoutError, urllib.error.URLError, ProctorError) as e:
                    if attempt == tries - 1 or isinstance(e, ProctorError) and e.status < 500:
                        raise
                    time.sleep(min(2 ** attempt, 10))
        return n

    def latest_build(self, environment):
        """The id of the build new runs of the environment called environment use: the caller's
        team's environment of that name first, else a public one."""
        found = [env for env in self._items("/v2/registry", {"search": environment})
                 if env["name"] == environment and env.get("latest_build_id")]
        found.sort(key=lambda env: not env.get("can_edit"))
        if not found:
            raise ProctorError(404, "not_found", f"no environment {environment!r} with a latest build")
        return found[0]["latest_build_id"]

    def certify(self, build_id, taskset_id, k=5, wait=True, poll=0.5, timeout=3600):
        """Certifies a build on a taskset (POST /v2/builds/{build_id}/certify): the oracle k times,
        the idle and random agents and the tamper probe once, on each task of the build's
        environment. With wait, returns the certification once its figures are recorded (status
        passed, flagged or failed; tasks, with their flags); else as it started."""
        cert = self._call("POST", f"/v2/builds/{build_id}/certify", {"taskset_id": taskset_id, "k": k})
        return self._recorded(f"/v2/builds/{build_id}/certification", cert, poll, timeout) if wait else cert

    def check(self, build_id, against_job_id, wait=True, poll=0.5, timeout=3600):
        """Replays a finished job's attempts on a build (POST /v2/builds/{build_id}/check): each
        scored attempt run again by the replay model with its recorded answers. With wait, returns
        the check once its comparison is recorded (status same, changed or failed; attempts, each
        with reward_before, reward_after, first_diverging_step and outcome); else as it started."""
        chk = self._call("POST", f"/v2/builds/{build_id}/check", {"against_job_id": against_job_id})
        return self._recorded(f"/v2/builds/{build_id}/check", chk, poll, timeout) if wait else chk

    def _recorded(self, path, started, poll, timeout):
        """What path answers once the check started as started is no longer running (a newer
        check of the build at path is a ProctorError 409; still running after timeout seconds,
        TimeoutError: it goes on, and path reads it later)."""
        now, deadline = started, time.monotonic() + timeout
        while now["status"] == "running":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{started['id']} still runs after {timeout} s: read it later with GET {path}")
            time.sleep(poll)
            now = self._call("GET", path)
            if now["id"] != started["id"]:
                raise ProctorError(409, "conflict", f"another check ({now['id']}) of the build started since {started['id']}")
        return now
