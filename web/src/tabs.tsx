import { useId, type ReactNode } from "react";

/** Tabs is an accessible tab list: arrow keys move between tabs, and one panel shows. */
export function Tabs<K extends string>({
  label,
  tabs,
  selected,
  onSelect,
  children,
}: {
  label: string;
  tabs: { key: K; title: string }[];
  selected: K;
  onSelect: (k: K) => void;
  children: ReactNode;
}) {
  const id = useId();
  const index = tabs.findIndex((t) => t.key === selected);
  return (
    <>
      <div
        role="tablist"
        aria-label={label}
        className="tabs"
        onKeyDown={(e) => {
          const step = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
          if (!step) return;
          e.preventDefault();
          const next = tabs[(index + step + tabs.length) % tabs.length];
          onSelect(next.key);
          document.getElementById(`${id}-tab-${next.key}`)?.focus();
        }}
      >
        {tabs.map((t) => (
          <button
            key={t.key}
            type="button"
            role="tab"
            id={`${id}-tab-${t.key}`}
            aria-selected={t.key === selected}
            aria-controls={`${id}-panel`}
            tabIndex={t.key === selected ? 0 : -1}
            onClick={() => onSelect(t.key)}
          >
            {t.title}
          </button>
        ))}
      </div>
      <div role="tabpanel" id={`${id}-panel`} aria-labelledby={`${id}-tab-${selected}`} tabIndex={0}>
        {children}
      </div>
    </>
  );
}
