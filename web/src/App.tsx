import { useCallback, useEffect, useState } from "react";
import { api, ok, signOut } from "./api/client";
import { usePoll } from "./hooks";
import { Models, Secrets, Usage } from "./pages/Account";
import { Compare, TracesSideBySide } from "./pages/Compare";
import { Environment, Environments } from "./pages/Environments";
import { Job } from "./pages/Job";
import { Jobs } from "./pages/Jobs";
import { Mentions, MentionsLink, mentionsPollMs } from "./pages/Mentions";
import { SignIn } from "./pages/SignIn";
import { Task } from "./pages/Task";
import { Taskset, Tasksets } from "./pages/Tasksets";
import { Trace } from "./pages/Trace";
import { href, navigate, useRoute } from "./router";

type Theme = "light" | "dark";

function initialTheme(): Theme {
  const saved = localStorage.getItem("proctor-theme");
  if (saved === "light" || saved === "dark") return saved;
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function App() {
  const route = useRoute();
  const [theme, setTheme] = useState<Theme>(initialTheme);
  // Whether the last API call was refused (401); signing in clears it.
  const [signedOut, setSignedOut] = useState(false);
  // Whether a session is open: published jobs and their traces open without one.
  const [signedIn, setSignedIn] = useState(false);
  useEffect(() => {
    void api.GET("/v2/models", { params: { query: { limit: 1 } } }).then((r) => setSignedIn(r.response.ok));
  }, [signedOut]);
  // The header's count of unread mentions, while signed in; a refused poll only hides it, for
  // the page (perhaps a published job) decides whether to ask for a sign-in.
  const mentions = usePoll(
    async () => (signedIn ? (await ok(api.GET("/v2/mentions", { params: { query: { unread_only: true, limit: 1 } } }))).unread : undefined),
    [signedIn],
    { intervalMs: mentionsPollMs, live: (n) => n !== undefined, onUnauthorized: () => setSignedIn(false) },
  );
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem("proctor-theme", theme);
  }, [theme]);
  const onUnauthorized = useCallback(() => {
    setSignedOut(true);
    navigate({ page: "signin" });
  }, []);
  // Signed out, a job or trace page stays (it may be published); other pages ask to sign in.
  const page =
    signedOut && route.page !== "signin" && route.page !== "job" && route.page !== "trace" && route.page !== "traces" ? { page: "signin" as const } : route;
  useEffect(() => {
    const titles = { signin: "Sign in", jobs: "Jobs", job: "Job", trace: "Trace", environments: "Environments", environment: "Environment",
      tasksets: "Tasksets", taskset: "Taskset", task: "Task", models: "Models", secrets: "Secrets", usage: "Limits and usage", mentions: "Mentions",
      compare: "Comparison", traces: "Traces side by side" };
    document.title = `${titles[page.page]} · Proctor`;
  }, [page.page]);

  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header>
        <nav aria-label="Main">
          <a className="brand" href={href({ page: "jobs" })}>
            Proctor
          </a>
          <a href={href({ page: "jobs" })} aria-current={page.page === "jobs" ? "page" : undefined}>
            Jobs
          </a>
          <a href={href({ page: "tasksets" })} aria-current={page.page === "tasksets" ? "page" : undefined}>
            Tasksets
          </a>
          <a href={href({ page: "environments" })} aria-current={page.page === "environments" ? "page" : undefined}>
            Environments
          </a>
          {(["models", "secrets", "usage"] as const).map((p) => (
            <a key={p} href={href({ page: p })} aria-current={page.page === p ? "page" : undefined}>
              {{ models: "Models", secrets: "Secrets", usage: "Usage" }[p]}
            </a>
          ))}
          <span className="spacer" />
          {signedIn && <MentionsLink unread={mentions.data ?? 0} current={page.page === "mentions"} />}
          <button type="button" className="secondary" onClick={() => setTheme(theme === "dark" ? "light" : "dark")}>
            {theme === "dark" ? "Light theme" : "Dark theme"}
          </button>
          {!signedIn && page.page !== "signin" && <a href={href({ page: "signin" })}>Sign in</a>}
          {signedIn && (
            <button
              type="button"
              className="secondary"
              onClick={async () => {
                await signOut();
                setSignedIn(false);
                setSignedOut(true);
                navigate({ page: "signin" });
              }}
            >
              Sign out
            </button>
          )}
        </nav>
      </header>
      <main id="main" tabIndex={-1}>
        {page.page === "signin" && (
          <SignIn
            onSignedIn={() => {
              setSignedOut(false);
              setSignedIn(true);
            }}
          />
        )}
        {page.page === "jobs" && <Jobs onUnauthorized={onUnauthorized} />}
        {page.page === "job" && <Job key={page.id} id={page.id} signedIn={signedIn} onUnauthorized={onUnauthorized} />}
        {page.page === "trace" && <Trace key={page.id} id={page.id} signedIn={signedIn} onUnauthorized={onUnauthorized} />}
        {page.page === "environments" && <Environments onUnauthorized={onUnauthorized} />}
        {page.page === "tasksets" && <Tasksets onUnauthorized={onUnauthorized} />}
        {page.page === "models" && <Models onUnauthorized={onUnauthorized} />}
        {page.page === "secrets" && <Secrets onUnauthorized={onUnauthorized} />}
        {page.page === "usage" && <Usage onUnauthorized={onUnauthorized} />}
        {page.page === "mentions" && <Mentions onUnauthorized={onUnauthorized} onRead={mentions.reload} />}
        {page.page === "taskset" && <Taskset id={page.id} onUnauthorized={onUnauthorized} />}
        {page.page === "task" && <Task tasksetId={page.tasksetId} id={page.id} onUnauthorized={onUnauthorized} />}
        {page.page === "environment" && <Environment id={page.id} onUnauthorized={onUnauthorized} />}
        {page.page === "compare" && <Compare key={`${page.a}/${page.b}`} a={page.a} b={page.b} onUnauthorized={onUnauthorized} />}
        {page.page === "traces" && (
          <TracesSideBySide key={`${page.a}/${page.b}`} a={page.a} b={page.b} signedIn={signedIn} onUnauthorized={onUnauthorized} />
        )}
      </main>
    </>
  );
}
