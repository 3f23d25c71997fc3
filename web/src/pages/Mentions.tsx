import { api, ok, type Schemas } from "../api/client";
import { fmtTime } from "../format";
import { useAction, usePoll } from "../hooks";
import { href } from "../router";
import { Status } from "../ui";

/** How often the header's count and the page look for new mentions: a mention is no alarm. */
export const mentionsPollMs = 15_000;

/** markMentionsRead marks the caller's listed mentions read; no ids: all of them. */
export function markMentionsRead(ids: string[] = []) {
  return ok(api.POST("/v2/mentions/read", { body: ids.length > 0 ? { ids } : {} }));
}

/** MentionsLink is the header's link to the mentions page, with the count of unread ones. */
export function MentionsLink({ unread, current }: { unread: number; current: boolean }) {
  return (
    <a href={href({ page: "mentions" })} aria-current={current ? "page" : undefined}>
      Mentions{unread > 0 && ` (${unread})`}
    </a>
  );
}

/**
 * Mentions lists the comments that name the member, newest first. onRead tells the header that
 * the unread count changed. Opening a mention's task marks it read, as reading it does.
 */
export function Mentions({ onUnauthorized, onRead }: { onUnauthorized: () => void; onRead: () => void }) {
  const { data, error, reload } = usePoll(() => ok(api.GET("/v2/mentions", { params: { query: { limit: 200 } } })), [], {
    intervalMs: mentionsPollMs,
    live: () => true,
    onUnauthorized,
  });
  const [actionError, act] = useAction(() => {
    reload();
    onRead();
  });
  const markRead = (ids?: string[]) => act(() => markMentionsRead(ids));
  return (
    <section>
      <h1>Mentions</h1>
      {error && <p role="alert" className="error">{error.message}</p>}
      {actionError && (
        <p role="alert" className="error">
          {actionError}
        </p>
      )}
      {!data && !error && <p aria-busy="true">Loading…</p>}
      {data && (
        <div className="inline">
          <span>{data.unread === 0 ? "All read." : `${data.unread} unread.`}</span>
          <button type="button" className="secondary" disabled={data.unread === 0} onClick={() => markRead()}>
            Mark all read
          </button>
        </div>
      )}
      {data && data.items.length === 0 && <p>No one has mentioned you yet. A comment on a task that names you (@name or @email) shows here.</p>}
      {data && data.items.length > 0 && (
        <ul className="comments mentions" aria-label="Mentions, newest first">
          {data.items.map((m) => (
            <MentionItem key={m.id} mention={m} onMarkRead={() => markRead([m.id])} />
          ))}
        </ul>
      )}
    </section>
  );
}

/** MentionItem is one mention: who, on which task, when, and the comment as written. */
function MentionItem({ mention: m, onMarkRead }: { mention: Schemas["Mention"]; onMarkRead: () => void }) {
  const unread = m.read_at === null;
  const who = m.actor_name || "Someone";
  return (
    <li className={unread ? "unread" : undefined}>
      <div className="inline">
        <span>
          <strong>{who}</strong> mentioned you on{" "}
          <a href={href({ page: "task", tasksetId: m.taskset_id, id: m.task_id })} onClick={unread ? onMarkRead : undefined}>
            {m.task_name}
          </a>
        </span>
        <span className="muted">{fmtTime(m.created_at)}</span>
        {unread && <Status value="unread" />}
        {unread && (
          <button type="button" className="secondary" aria-label={`Mark read: ${who} on ${m.task_name}`} onClick={onMarkRead}>
            Mark read
          </button>
        )}
      </div>
      <p>{m.comment}</p>
    </li>
  );
}
