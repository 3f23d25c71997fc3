export function Status({ value }: { value: string }) {
  return <span className={`status status-${value}`}>{value.replace(/_/g, " ")}</span>;
}
