export function Status({ value }: { value: string }) {
  return <span className={`status status-${value}`}>{value.replace(/_/g, " ")}</span>;
}

/** Head is a table's header row: one column heading each, and an unnamed actions column. */
export function Head({ cols, actions }: { cols: string[]; actions?: boolean }) {
  return (
    <thead>
      <tr>
        {cols.map((c) => (
          <th key={c} scope="col">
            {c}
          </th>
        ))}
        {actions && (
          <th scope="col">
            <span className="visually-hidden">Actions</span>
          </th>
        )}
      </tr>
    </thead>
  );
}

/** DeleteButton deletes one row; label names it for screen readers. */
export function DeleteButton({ label, onDelete }: { label: string; onDelete: () => void }) {
  return (
    <button type="button" className="secondary" aria-label={label} onClick={onDelete}>
      Delete
    </button>
  );
}

/** JobStatus is a job's status badge; a job whose attempts errored says how many. */
export function JobStatus({ status, errors }: { status: string; errors: number }) {
  if (errors === 0) return <Status value={status} />;
  return (
    <span className={`status status-${status} status-with-errors`}>
      {status} · {errors} error{errors === 1 ? "" : "s"}
    </span>
  );
}
