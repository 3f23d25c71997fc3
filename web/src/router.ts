// Hash routes (#/jobs/ID): the server serves one page, and links work without it knowing them.
import { useEffect, useState } from "react";

export type Route =
  | { page: "signin" }
  | { page: "jobs" }
  | { page: "job"; id: string }
  | { page: "trace"; id: string }
  | { page: "environments" }
  | { page: "tasksets" }
  | { page: "models" }
  | { page: "secrets" }
  | { page: "usage" }
  | { page: "mentions" }
  | { page: "taskset"; id: string }
  | { page: "task"; tasksetId: string; id: string }
  | { page: "environment"; id: string }
  | { page: "compare"; a: string; b: string }
  | { page: "traces"; a: string; b: string };

export function parse(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "signin") return { page: "signin" };
  if (parts[0] === "compare" && parts[1] && parts[2]) return { page: "compare", a: parts[1], b: parts[2] };
  if (parts[0] === "compare-traces" && parts[1] && parts[2]) return { page: "traces", a: parts[1], b: parts[2] };
  if (parts[0] === "jobs" && parts[1]) return { page: "job", id: parts[1] };
  if (parts[0] === "traces" && parts[1]) return { page: "trace", id: parts[1] };
  if (parts[0] === "tasksets" && parts[1] && parts[2] === "tasks" && parts[3]) return { page: "task", tasksetId: parts[1], id: parts[3] };
  if (parts[0] === "tasksets") return parts[1] ? { page: "taskset", id: parts[1] } : { page: "tasksets" };
  if (parts[0] === "models" || parts[0] === "secrets" || parts[0] === "usage" || parts[0] === "mentions") return { page: parts[0] };
  if (parts[0] === "environments") return parts[1] ? { page: "environment", id: parts[1] } : { page: "environments" };
  return { page: "jobs" };
}

export function href(r: Route): string {
  switch (r.page) {
    case "signin":
      return "#/signin";
    case "jobs":
      return "#/jobs";
    case "job":
      return `#/jobs/${encodeURIComponent(r.id)}`;
    case "trace":
      return `#/traces/${encodeURIComponent(r.id)}`;
    case "environments":
      return "#/environments";
    case "tasksets":
      return "#/tasksets";
    case "models":
    case "secrets":
    case "usage":
    case "mentions":
      return `#/${r.page}`;
    case "taskset":
      return `#/tasksets/${encodeURIComponent(r.id)}`;
    case "task":
      return `#/tasksets/${encodeURIComponent(r.tasksetId)}/tasks/${encodeURIComponent(r.id)}`;
    case "environment":
      return `#/environments/${encodeURIComponent(r.id)}`;
    case "compare":
      return `#/compare/${encodeURIComponent(r.a)}/${encodeURIComponent(r.b)}`;
    case "traces":
      return `#/compare-traces/${encodeURIComponent(r.a)}/${encodeURIComponent(r.b)}`;
  }
}

export function navigate(r: Route): void {
  window.location.hash = href(r);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parse(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parse(window.location.hash));
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return route;
}
